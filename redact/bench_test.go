package redact_test

import (
	"os"
	"strings"
	"testing"

	"github.com/purser-dev/purser/redact"
)

// Redaction runs on every string Purser records: a call's note, an error,
// a prompt, up to 64 KiB of a validator's output.
func BenchmarkString(b *testing.B) {
	goTest, err := os.ReadFile("testdata/go-test-v.txt")
	if err != nil {
		b.Fatal(err)
	}
	// Every line names a key or an API: the rules' worst case.
	keywordDense := strings.Repeat("=== RUN   TestParser/trailing_comma\n    parser_test.go:42: got error \"unexpected token ]\", want nil (api version 2, key order kept)\n--- FAIL: TestParser/trailing_comma (0.00s)\n", 400)[:64<<10]
	testOutput := strings.Repeat(string(goTest), 64<<10/len(goTest)+1)[:64<<10]
	withSecrets := testOutput[:32<<10] + "\nDATABASE_URL=postgres://app:" + dbPassword + "@db:5432/app\naws_secret_access_key = " + awsSecret + "\n" + testOutput[:32<<10]
	for _, bc := range []struct{ name, in string }{
		{"note 100 B", "budget exhausted: task hard cap on money reached ($1.00 used of $1.00); 3 file(s) written"},
		{"go test -v output 64 KiB", testOutput},
		{"keyword on every line 64 KiB", keywordDense},
		{"test output 64 KiB with secrets", withSecrets},
	} {
		b.Run(bc.name, func(b *testing.B) {
			redact.String(bc.in) // the rules compile once, on first use
			b.SetBytes(int64(len(bc.in)))
			for b.Loop() {
				redact.String(bc.in)
			}
		})
	}
}
