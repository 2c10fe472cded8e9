package engine

// ForceRetryPromptChanges has the tasks of workspace take a prompt change
// on a retry unjudged (as before the judgement), until the returned
// function is called: what forcing it bills is measured, not assumed.
func ForceRetryPromptChanges(workspace string) (undo func()) {
	unjudgedRetries.Store(workspace, true)
	return func() { unjudgedRetries.Delete(workspace) }
}
