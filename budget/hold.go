package budget

// HoldWarning puts this budget in WARNING by metric, whatever its figures
// say, for as long as it lives: for a trigger read from outside them — a
// forecast's upper bound passing the hard cap of metric (warning.forecast:
// hard; money or tokens) — so that everything that follows the budget's
// tier (the degrade policy, status, the WARNING alert) follows it too. It
// never lowers a tier, and HARD is still reached only by the figures; the
// first metric held is kept. Listeners are told at once, as for a
// recording.
func (m *Manager) HoldWarning(metric Metric) Tier {
	if metric == NoMetric {
		metric = Money
	}
	m.mu.Lock()
	if m.warningBy == NoMetric {
		m.warningBy = metric
	}
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
	return m.warningBy != NoMetric && t < Warning
}
