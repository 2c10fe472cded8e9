package main

import (
	"fmt"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/backend/codex"
	agentexec "github.com/purser-dev/purser/backend/exec"
	"github.com/purser-dev/purser/backend/gemini"
	"github.com/purser-dev/purser/backend/openai"
	"github.com/purser-dev/purser/backend/sim"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/engine"
)

// backends returns the resolver of the backends a task names. Only
// cmd/purser knows the concrete backends; the engine prices their usage.
func backends() engine.BackendResolver {
	return func(spec purser.BackendSpec) (purser.Backend, error) {
		switch spec.Type {
		case "sim":
			return sim.New(spec)
		case "claude":
			return claude.New(spec)
		case "codex":
			return codex.New(spec)
		case "exec":
			return agentexec.New(spec)
		case "openai":
			return openai.New(spec)
		case "gemini":
			return gemini.New(spec)
		}
		return nil, fmt.Errorf("backend type %q is not available (available: sim, claude, codex, gemini, openai, exec)", spec.Type)
	}
}

// loadTask reads a task file and its project. Every check that can be made
// before a cent is spent belongs here, so that bad input exits 2 with
// nothing recorded.
func loadTask(path string) (purser.Task, *config.Project, error) {
	task, proj, err := config.LoadTask(path)
	if err == nil && proj != nil {
		warnPrices(proj.Prices)
	}
	return task, proj, err
}
