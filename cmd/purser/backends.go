package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/agent"
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
		case "agent":
			return agent.New(spec)
		}
		return nil, fmt.Errorf("type %q is not available (known: %s)", spec.Type, strings.Join(backendTypes().Names(), ", "))
	}
}

// backendTypes are the backend types a task may name, each with the options
// its package declares, so that config can decode and check them when a file
// is loaded. Every type backends resolves is here.
func backendTypes() backend.Types {
	return backend.Types{
		"sim":    sim.NewOptions,
		"claude": claude.NewOptions,
		"codex":  codex.NewOptions,
		"exec":   agentexec.NewOptions,
		"openai": openai.NewOptions,
		"gemini": gemini.NewOptions,
		"agent":  agent.NewOptions,
	}
}

// loadTask reads a task file and its project. Every check that can be made
// before a cent is spent belongs here, so that bad input exits 2 with
// nothing recorded: the task's fields and workspace, and the options of
// every backend the files declare, decoded strictly; and, for the backend
// the task runs on, its script, command or key checked on this machine.
func loadTask(path string) (purser.Task, *config.Project, error) {
	task, proj, err := config.Loader{Backends: backendTypes()}.LoadTask(path)
	if err == nil && proj != nil {
		warnPrices(proj.Prices)
	}
	if w := config.SubscriptionWarning(task); err == nil && w != "" {
		fmt.Fprintln(os.Stderr, "purser:", w)
	}
	return task, proj, err
}
