package validate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/validate"
)

// A boxed validator (it runs the repository's code) sees none of the real
// HOME's secrets nor Purser's environment, has a HOME of its own outside
// the workspace, kept, and no network. Each check fails unboxed.
func TestBoxedValidatorSeesOnlyItsWorkspace(t *testing.T) {
	requireBox(t)
	realHome := mkdirOutsideTmp(t)
	if err := os.MkdirAll(filepath.Join(realHome, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(realHome, ".ssh", "id_ed25519"), []byte("PRIVATE-KEY-TEXT"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGPASSWORD", "pg-secret")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("VALIDATE_TEST_WANTED", "named")
	homes := t.TempDir()
	r := validate.Runner{Sandbox: &validate.Sandbox{Homes: homes, Env: []string{"VALIDATE_TEST_WANTED"}}}
	ws := t.TempDir()
	run := `cat ` + realHome + `/.ssh/id_ed25519 && echo READ-THE-KEY
echo "pg=${PGPASSWORD:-none} wanted=${VALIDATE_TEST_WANTED:-none} lang=${LANG:-none}"
echo "home=$HOME"; echo kept > "$HOME/mark"
if (exec 3<>/dev/tcp/1.1.1.1/443) 2>/dev/null; then echo NETWORK; fi
true`
	res := r.RunValidator(context.Background(), ws, purser.Validator{Name: "snoop", Run: run})
	if !res.Passed {
		t.Fatalf("res = %+v", res)
	}
	for _, bad := range []string{"PRIVATE-KEY-TEXT", "READ-THE-KEY", "pg-secret", "NETWORK"} {
		if strings.Contains(res.Output, bad) {
			t.Errorf("a boxed validator got %q:\n%s", bad, res.Output)
		}
	}
	for _, want := range []string{"pg=none", "wanted=named", "lang=C.UTF-8", "home=" + homes + "/validators-"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Output)
		}
	}
	marks, _ := filepath.Glob(filepath.Join(homes, "validators-*", "mark"))
	if len(marks) != 1 {
		t.Errorf("the validators' HOME was not kept outside the workspace: %v", marks)
	}
}

// mkdirOutsideTmp makes a directory the box would not hide merely by its
// private /tmp: beside the test's working directory.
func mkdirOutsideTmp(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(wd, "realhome-")
	if err != nil {
		t.Skipf("no directory outside /tmp to play the real HOME: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
