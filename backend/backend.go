// Package backend is what every backend driver shares below the drivers
// themselves: the options a driver declares and how they are decoded from a
// task file (strictly, each problem named by option), and the usage-event
// line a driver or an agent writes. The drivers (claude, codex, gemini,
// openai, exec, sim) import it and never the config loader, which calls
// into it; config and cmd/purser give the drivers' option types to the
// loader.
package backend
