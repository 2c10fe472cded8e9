package purser

import "github.com/purser-dev/purser/budget"

// EventType says what an Event reports.
type EventType string

// The events the engine reports while it runs tasks.
const (
	EventIteration  EventType = "iteration"   // an iteration starts
	EventCall       EventType = "call"        // a backend call starts
	EventCallEnd    EventType = "call_end"    // a backend call ends
	EventUsage      EventType = "usage"       // usage streamed in (many per call)
	EventTier       EventType = "tier"        // a budget changed tier
	EventDegrade    EventType = "degrade"     // a degrade action was taken
	EventValidator  EventType = "validator"   // a validator ran
	EventStop       EventType = "stop"        // the task stopped (State says how)
	EventNotStarted EventType = "not_started" // the run was interrupted before the task started
	// EventWarning: something the user should know before money is spent,
	// such as a call on a model Purser has no price for.
	EventWarning EventType = "warning"
)

// Event tells an observer (the live view, a log, a dashboard) what the
// engine did. Status is the task's budget after the event, Run the run's.
type Event struct {
	TaskID    string
	Type      EventType
	Iteration int
	Call      CallKind
	Message   string
	State     TaskState      // the task's state, on stop events
	Status    budget.Status  // the task's budget status after the event
	Run       *budget.Status // the run's, when the task has a run budget
}

// Owners identifies processes in task records, so that a task RUNNING in a
// live process is never run twice and one whose process died can be resumed.
type Owners interface {
	// Self is this process's owner ID.
	Self() string
	// Gone reports whether the process an owner ID names is known to be
	// gone. An owner on another host is not known to be gone.
	Gone(owner string) bool
}
