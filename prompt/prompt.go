// Package prompt turns a built context into the text sent to an agent, for
// each kind of call, with the repair-only instructions when that degrade
// action is in force.
package prompt

import (
	"fmt"
	"strings"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/contextbuild"
)

// RepairOnlyLines are the spec's repair-only instructions, verbatim.
var RepairOnlyLines = []string{
	"Fix only failing validators",
	"Do NOT refactor unrelated code",
	"Do NOT add new features",
}

// Input is what a prompt is built from.
type Input struct {
	Kind       purser.CallKind
	Iteration  int
	Context    contextbuild.Context
	RepairOnly bool
	Validators []purser.Validator
}

// Build returns the prompt text.
func Build(in Input) string {
	var b strings.Builder
	switch in.Kind {
	case purser.CallPlanning:
		if in.Iteration <= 1 {
			b.WriteString("Write a short, numbered plan for the task below. Do not change any files yet.\n")
		} else {
			b.WriteString("The last attempt did not pass its validators. Revise the plan for the task below from the failures shown. Do not change any files yet.\n")
		}
	case purser.CallSelfReview:
		b.WriteString("Review the changes you just made in the workspace for the task below. Fix anything wrong; change nothing else.\n")
	default:
		fmt.Fprintf(&b, "You are working in a code workspace (iteration %d). Make the changes the task below needs, editing files in place.\n", in.Iteration)
	}
	if in.RepairOnly {
		b.WriteString("\n")
		for _, l := range RepairOnlyLines {
			b.WriteString(l + "\n")
		}
	}
	if len(in.Validators) > 0 {
		b.WriteString("\nThe work is done when these commands pass in the workspace:\n")
		for _, v := range in.Validators {
			fmt.Fprintf(&b, "- %s: %s\n", v.Name, v.Run)
		}
	}
	for _, s := range in.Context.Sections {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n", s.Title, strings.TrimRight(s.Body, "\n"))
	}
	return b.String()
}
