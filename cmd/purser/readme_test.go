package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The README's first install command is one a newcomer can run: from a
// clone, since the module is not published (go install …@latest answers
// 403 until it is), and the @latest line says when it works (issue 23 #1).
func TestReadmeInstallsFromAClone(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	first := regexp.MustCompile("`(go install [^`]+)`").FindStringSubmatch(readme)
	if first == nil || first[1] != "go install ./cmd/purser" {
		t.Fatalf("the README's first install command is %q, want `go install ./cmd/purser` (from a clone)", first)
	}
	if _, err := os.Stat("main.go"); err != nil {
		t.Fatalf("./cmd/purser has no main.go: %v", err)
	}
	i := strings.Index(readme, "purser/cmd/purser@latest")
	if i < 0 || !strings.Contains(readme[i:min(i+200, len(readme))], "once the module is published") {
		t.Error("the README's @latest install line does not say it works only once the module is published")
	}
}
