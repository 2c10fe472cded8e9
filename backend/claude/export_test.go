package claude

// ClaudeCodePrices is claudeCodePrices, for the tests.
var ClaudeCodePrices = claudeCodePrices
