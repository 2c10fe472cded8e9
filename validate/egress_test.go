package validate_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/validate"
)

// A boxed validator reaches what the project's sandbox.network.allow lists,
// through Purser's egress proxy, and nothing else (a 403 naming it).
func TestBoxedValidatorReachesOnlyTheAllowList(t *testing.T) {
	requireBox(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl to play the validator's download")
	}
	serve := func(name string) string {
		s := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprint(rw, name+" answered") }))
		t.Cleanup(s.Close)
		return strings.TrimPrefix(s.URL, "http://")
	}
	registry, other := serve("registry"), serve("other")
	r := validate.Runner{Sandbox: &validate.Sandbox{Homes: t.TempDir(), Allow: []string{registry}}}
	// --noproxy '': the test's servers are on 127.0.0.1, which NO_PROXY keeps
	// direct (for the door); a real registry is not.
	run := `get() { curl -sS --max-time 10 --noproxy '' "$@"; echo; }
get http://` + registry + `/
get http://` + other + `/
curl -sS --max-time 3 --noproxy '*' http://` + registry + `/ || echo DIRECT-REFUSED
true`
	res := r.RunValidator(context.Background(), t.TempDir(), purser.Validator{Name: "download", Run: run})
	for _, want := range []string{"registry answered", "the box may not reach " + other, "DIRECT-REFUSED"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Output)
		}
	}
	if strings.Contains(res.Output, "other answered") {
		t.Errorf("the validator reached an unlisted server:\n%s", res.Output)
	}
}
