package budget

// HoldWarning puts this budget in WARNING, whatever its figures say, for as
// long as it lives: for a trigger read from outside them — the spend
// forecast's upper bound passing the hard money cap (warning.forecast:
// hard) — so that everything that follows the budget's tier (the degrade
// policy, status, the WARNING alert) follows it too. The metric said is
// money, the one forecast. It never lowers a tier, and HARD is still
// reached only by the figures. Listeners are told at once, as for a
// recording.
func (m *Manager) HoldWarning() Tier {
	m.mu.Lock()
	m.warningHeld = true
	t, ls, ch := m.observeLocked(m.nowLocked())
	m.mu.Unlock()
	if ls != nil {
		notify(ls, ch)
	}
	return t
}

// WarningHeld reports whether this budget is in WARNING by HoldWarning
// alone: its figures would leave it OPTIMAL.
func (m *Manager) WarningHeld() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, _ := m.spendTierLocked(m.nowLocked())
	return m.warningHeld && t < Warning
}
