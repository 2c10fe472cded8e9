package redact_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/redact"
)

// Test-only secrets: random, never issued, in the shapes providers issue.
const (
	awsAccessKey = "AKIAZ7Q3LMNP4RT2XW6Y"
	awsSecret    = "q9Vh3kT0bXr7NcLw2YpZ8fGm4JdS6uEa1HoKiR5t"
	dbPassword   = "S3cr3t-Pa55w0rd"
	stripeKey    = "sk_live_51HqLyjWDarjtT1zdp7dcXnP4q2"
	gitlabPAT    = "glpat-xK9mPq2RsT4vWy6zA8bC"
	hfToken      = "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"
	jwt          = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	pemBody      = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDx3kJ7mG0pQ2vR8sT4uW6yZ1aB3cD5eF7gH9iJ0kL2mNQAAAJgq7Yf1Ku2H\n9QAAAAtzc2gtZWQyNTUxOQAAACDx3kJ7mG0pQ2vR8sT4uW6yZ1aB3cD5eF7gH9iJ0kL2mN"
	pemKey       = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + pemBody + "\n-----END OPENSSH PRIVATE KEY-----"
)

// Issue 15 #11: the secret shapes that used to reach STATUS.md, the
// transcript and the database are redacted, and the text around them kept.
func TestStringRedactsKnownSecretShapes(t *testing.T) {
	tests := []struct{ name, in, gone, kept string }{
		{"AWS access key id", "export AWS_ACCESS_KEY_ID=" + awsAccessKey, awsAccessKey, "export AWS_ACCESS_KEY_ID="},
		{"AWS access key id, bare", "using key " + awsAccessKey + " for s3", awsAccessKey, "for s3"},
		{"AWS secret access key", "aws_secret_access_key = " + awsSecret, awsSecret, "aws_secret_access_key"},
		{"AWS secret in JSON", `{"SecretAccessKey": "` + awsSecret + `"}`, awsSecret, "SecretAccessKey"},
		{"password in a postgres URL", "dial postgres://app:" + dbPassword + "@db.internal:5432/app failed", dbPassword, "db.internal:5432/app failed"},
		{"password in a redis URL", "REDIS=redis://:" + dbPassword + "@cache:6379/0", dbPassword, "@cache:6379/0"},
		{"password in an https URL", "git clone https://bot:" + dbPassword + "@git.example.com/x.git", dbPassword, "git.example.com/x.git"},
		{"Stripe live key", "stripe " + stripeKey + " charged", stripeKey, " charged"},
		{"GitLab PAT", "CI_TOKEN is " + gitlabPAT + ".", gitlabPAT, "CI_TOKEN is "},
		{"Hugging Face token", "hf token " + hfToken + " loaded", hfToken, " loaded"},
		{"JWT", "cookie session=" + jwt + "; path=/", jwt, "; path=/"},
		{"PEM private key", "key file:\n" + pemKey + "\nend of file", "3kJ7mG0pQ2vR8sT4uW6yZ1aB3cD5eF7gH9iJ0kL2mN", "end of file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := redact.String(tt.in)
			if strings.Contains(got, tt.gone) || !strings.Contains(got, tt.kept) || !strings.Contains(got, redact.Mask) {
				t.Errorf("String(%q) = %q", tt.in, got)
			}
			if got := string(redact.Bytes([]byte(tt.in))); strings.Contains(got, tt.gone) {
				t.Errorf("Bytes(%q) = %q", tt.in, got)
			}
		})
	}
}

// Ordinary output of a build, a test run and Purser itself is left alone.
func TestStringLeavesOrdinaryTextAlone(t *testing.T) {
	for _, s := range []string{
		"ok  \tgithub.com/purser-dev/purser/budget\t0.412s",
		"--- FAIL: TestParser (0.00s)\n    parser_test.go:42: trailing comma rejected at [1, 2,]",
		"12000 tokens used of 150000; $0.4200 (reported); key: value",
		"https://github.com/purser-dev/purser/blob/main/README.md#the-budget-model",
		"git@github.com:purser-dev/purser.git",
		"postgres://localhost:5432/app",
		"the key is to keep the budget; api version 2; monkey business",
	} {
		if got := redact.String(s); got != s {
			t.Errorf("String(%q) = %q: ordinary text changed", s, got)
		}
	}
}

// The embedded gitleaks rules load, every regexp compiles, and a secret at
// the very start or end of a text, or two side by side, is masked whole.
func TestGitleaksRulesLoad(t *testing.T) {
	n, err := redact.GitleaksRules()
	if err != nil || n < 200 {
		t.Fatalf("gitleaks %s rules: %d loaded, %v", redact.GitleaksVersion, n, err)
	}
	for _, in := range []string{gitlabPAT, gitlabPAT + " " + stripeKey, awsAccessKey + "\n" + hfToken} {
		got := redact.String(in)
		for _, part := range strings.Fields(in) {
			if strings.Contains(got, part) {
				t.Errorf("String(%q) = %q", in, got)
			}
		}
		if !strings.HasPrefix(got, redact.Mask) {
			t.Errorf("String(%q) = %q: the mask is missing", in, got)
		}
	}
}
