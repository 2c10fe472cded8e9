package main

import (
	"context"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"purser": func() { os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the end-to-end scripts in testdata/script: the real
// binary's exit codes, stdout and stderr.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("EXAMPLES", mustAbs("../../examples"))
			return nil
		},
	})
}

func mustAbs(rel string) string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return wd + "/" + rel
}
