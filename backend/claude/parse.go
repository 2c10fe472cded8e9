package claude

import (
	"encoding/json"
	"fmt"
	"math/big"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/purser-dev/purser/backend/internal/usagedelta"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
)

// anthropicUsage is a message's usage as Anthropic reports it: input
// excludes the cache tokens.
type anthropicUsage struct {
	Input      int64 `json:"input_tokens"`
	CacheWrite int64 `json:"cache_creation_input_tokens"`
	CacheRead  int64 `json:"cache_read_input_tokens"`
	Output     int64 `json:"output_tokens"`
	// CacheCreation splits the cache writes by lifetime, where the API gives it:
	// a 1-hour write is billed at 2× input, a 5-minute one at 1.25×.
	CacheCreation *struct {
		OneHour int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	ServiceTier string `json:"service_tier"`
}

// event normalises to Purser's shape: input counts every prompt token.
func (u anthropicUsage) event(model string) budget.UsageEvent {
	ev := budget.UsageEvent{InputTokens: u.Input + u.CacheRead + u.CacheWrite, CacheReadTokens: u.CacheRead,
		CacheWriteTokens: u.CacheWrite, OutputTokens: u.Output, Model: model, ServiceTier: u.ServiceTier}
	if u.CacheCreation != nil {
		ev.CacheWrite1hTokens = min(max(u.CacheCreation.OneHour, 0), ev.CacheWriteTokens)
	}
	return ev
}

type modelUsage struct {
	Input      int64   `json:"inputTokens"`
	Output     int64   `json:"outputTokens"`
	CacheRead  int64   `json:"cacheReadInputTokens"`
	CacheWrite int64   `json:"cacheCreationInputTokens"`
	CostUSD    float64 `json:"costUSD"`
}

// Result is Claude Code's final result line.
type Result struct {
	Subtype        string                `json:"subtype"`
	IsError        bool                  `json:"is_error"`
	APIErrorStatus *int                  `json:"api_error_status"`
	TotalCostUSD   *float64              `json:"total_cost_usd"`
	NumTurns       int                   `json:"num_turns"`
	Result         string                `json:"result"`
	TerminalReason string                `json:"terminal_reason"`
	SessionID      string                `json:"session_id"`
	Errors         []string              `json:"errors"`
	ModelUsage     map[string]modelUsage `json:"modelUsage"`
}

// apiMessage is an Anthropic message as the stream, the assistant events and
// the transcript carry it.
type apiMessage struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Usage   *anthropicUsage `json:"usage"`
	Content []contentBlock  `json:"content"`
}

// contentBlock is the part of a message's content that names a sub-agent:
// a Task (or, in later CLIs, Agent) tool_use starts one, and the messages
// of that sub-agent carry the tool_use's id as their parent_tool_use_id.
type contentBlock struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Name  string `json:"name"`
	Input struct {
		SubagentType string `json:"subagent_type"`
		Description  string `json:"description"`
	} `json:"input"`
}

type line struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype"`
	SessionID string          `json:"session_id"`
	Event     json.RawMessage `json:"event"`
	Message   *apiMessage     `json:"message"`
	// ParentToolUseID is set on a sub-agent's lines: the id of the tool_use
	// that started it.
	ParentToolUseID string `json:"parent_tool_use_id"`
	// system api_retry lines
	Attempt     int `json:"attempt"`
	ErrorStatus int `json:"error_status"`
}

type streamEvent struct {
	Type    string          `json:"type"`
	Message *apiMessage     `json:"message"`
	Usage   *anthropicUsage `json:"usage"`
}

// Parser reads Claude Code's stream-json output line by line and turns it
// into usage events as it goes. Usage is tracked per API message, and only
// what a message has not reported before is emitted, so every token is
// counted once however many snapshots (message_start, assistant events,
// message_delta, the session transcript) repeat it. The events carry tokens
// and the model, never an estimate: whoever records them prices them (the
// engine), and Reconcile settles against that pricing.
type Parser struct {
	emitted map[string]budget.UsageEvent // per message id: what was emitted
	agentOf map[string]string            // per message id: the sub-agent that sent it ("" for the main agent)
	agents  map[string]string            // per sub-agent tool_use id: its name
	// agentTools links a sub-agent's agentId (its transcript's) to the id
	// of the tool_use that started it (the stream's parent_tool_use_id).
	agentTools map[string]string
	order      []string
	events     []budget.UsageEvent // every event emitted, as emitted
	current    string              // the message being streamed
	model      string
	// open is the streamed message whose end (message_delta, message_stop)
	// has not come yet: if another message starts instead, its stream was
	// dropped and the new one is Claude Code's retry of the request.
	open string
	// replaced says which dropped messages were retried, for the note.
	replaced []string

	session string
	result  *Result
	retries int
}

// NewParser returns a parser.
func NewParser() *Parser {
	return &Parser{emitted: map[string]budget.UsageEvent{}, agentOf: map[string]string{}, agents: map[string]string{},
		agentTools: map[string]string{}}
}

// SpawnedSubAgents reports whether the stream showed a sub-agent started.
func (p *Parser) SpawnedSubAgents() bool { return len(p.agents) > 0 }

// Session returns the session id, once the init line was read.
func (p *Parser) Session() string { return p.session }

// Result returns the final result, or nil if none was read.
func (p *Parser) Result() *Result { return p.result }

// Retries returns how many API retries Claude Code announced.
func (p *Parser) Retries() int { return p.retries }

// Feed reads one line of output and returns the usage it adds. A line that
// is not JSON is an error; a JSON line of an unknown type is ignored (the
// CLI adds types over time).
func (p *Parser) Feed(b []byte) ([]budget.UsageEvent, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("claude: unreadable output line: %w", err)
	}
	if l.SessionID != "" && p.session == "" {
		p.session = l.SessionID
	}
	switch l.Type {
	case "stream_event":
		var ev streamEvent
		if err := json.Unmarshal(l.Event, &ev); err != nil {
			return nil, fmt.Errorf("claude: unreadable stream event: %w", err)
		}
		switch ev.Type {
		case "message_start":
			if ev.Message != nil && ev.Message.Usage != nil {
				p.attribute(ev.Message.ID, l.ParentToolUseID)
				evs := p.observe(ev.Message.ID, ev.Message.Model, *ev.Message.Usage)
				p.current, p.model, p.open = ev.Message.ID, ev.Message.Model, ev.Message.ID
				return evs, nil
			}
		case "message_delta":
			if ev.Usage != nil && p.current != "" {
				p.open = ""
				return p.observe(p.current, p.model, *ev.Usage), nil
			}
		case "message_stop":
			p.open = ""
		}
	case "assistant":
		if l.Message != nil {
			p.nameSubAgents(l.Message.Content)
		}
		if l.Message != nil && l.Message.Usage != nil && l.Message.ID != "" {
			p.attribute(l.Message.ID, l.ParentToolUseID)
			return p.observe(l.Message.ID, l.Message.Model, *l.Message.Usage), nil
		}
	case "system":
		if l.Subtype == "api_retry" {
			p.retries++
		}
	case "result":
		var r Result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("claude: unreadable result: %w", err)
		}
		p.result = &r
	}
	return nil, nil
}

// maxAgentName bounds a sub-agent's name in the ledger: the description is
// the model's own words, meant to be a few.
const maxAgentName = 80

// nameSubAgents remembers the sub-agents a message starts, by the id of the
// tool_use that starts each, so their usage is attributed by name.
func (p *Parser) nameSubAgents(content []contentBlock) {
	for _, c := range content {
		if c.Type != "tool_use" || c.ID == "" || (c.Name != "Task" && c.Name != "Agent") {
			continue
		}
		name := c.Input.SubagentType
		if d := strings.Join(strings.Fields(c.Input.Description), " "); d != "" {
			if name != "" {
				name += ": "
			}
			name += d
		}
		if name == "" {
			name = c.ID
		}
		// The description is the model's own words, and goes to the
		// ledger: no secret it happens to quote goes with it.
		name = redact.String(name)
		if r := []rune(name); len(r) > maxAgentName {
			name = string(r[:maxAgentName-1]) + "…"
		}
		p.agents[c.ID] = name
	}
}

// attribute records which sub-agent sent a message: the first line that
// says so wins, so every event of the message lands on one agent.
func (p *Parser) attribute(id, parentToolUseID string) {
	if parentToolUseID == "" || p.agentOf[id] != "" {
		return
	}
	name, ok := p.agents[parentToolUseID]
	if !ok {
		name = parentToolUseID // a sub-agent whose start was not seen
	}
	p.agentOf[id] = name
}

// observe takes a usage snapshot of a message and emits what is new in it.
//
// A new message while a streamed one is still open means that stream was
// dropped (a connection lost after message_start) and Claude Code retried
// the request — streaming again, or falling back to a request without
// streaming. The dropped stream's usage stays booked, once: its provider
// reported it (message_start names the request's input), and a provider
// bills a request's input once it has started it — as Purser's door books a
// reply it cuts (gateway.Lane.bookCut) and as Gemini CLI counts a dropped
// stream's prompt. Only a dropped stream whose provider reported nothing (the
// Responses API's, cut before response.completed) books nothing. The retry
// is a request of its own, booked whole (issue 22, item 10; issue 11 item 5
// had the retry take the dropped stream's usage over, which booked it not at
// all when the retry brought no message_delta, and a second time when it
// did).
func (p *Parser) observe(id, model string, u anthropicUsage) []budget.UsageEvent {
	prev, seen := p.emitted[id]
	if !seen {
		p.order = append(p.order, id)
		if p.open != "" && p.open != id {
			dropped := p.emitted[p.open]
			p.replaced = append(p.replaced, fmt.Sprintf("the dropped stream of message %s kept (%d tokens its provider reported at its start) beside its retry %s", p.open, dropped.Tokens(), id))
			p.open = ""
			// The retry is now the message being delivered: Claude Code
			// follows a non-streaming retry with a message_delta of its
			// own, naming no message, which is the retry's usage, not the
			// dropped message's.
			p.current, p.model = id, model
		}
	}
	want := u.event(model)
	if want.ServiceTier == "" {
		// message_delta's usage names no tier: the request's is the one
		// its message_start gave.
		want.ServiceTier = prev.ServiceTier
	}
	delta, next := usagedelta.Grow(prev, want)
	next.ServiceTier = want.ServiceTier
	p.emitted[id] = next
	if delta.Tokens() == 0 {
		return nil
	}
	if next.InputTokens > delta.InputTokens {
		// A piece of a request whose input was reported before (the output
		// of message_delta): priced at the whole request's long-context
		// tier, as it is billed (issue 22, item 9).
		delta.RequestInputTokens = next.InputTokens
	}
	delta.Agent = p.agentOf[id]
	p.events = append(p.events, delta)
	return []budget.UsageEvent{delta}
}

// Reconcile compares the result's totals with what was emitted, and returns
// the events that bring the ledger to the reported figures: tokens the
// stream missed, and the reported cost less what the streamed events were
// priced at (as a reported amount). note says how the estimate compared with
// the report.
//
// price must be the pricing the emitted events are recorded with (the
// engine's, purser.CallRequest.Price); nil means they are recorded unpriced.
// Claude Code reports its cost only once, at the end, while the budget needs
// dollars as the call streams: so the streamed tokens are estimated where
// they are recorded, and the reconciliation here is a reported adjustment
// against that very estimate. Re-pricing each emitted event with the same
// function gives exactly what the ledger holds, so the reported total lands
// to the nano-dollar and no dollar is counted twice — rather than a reported
// total that "replaces" estimates, which an append-only ledger of
// non-negative events cannot express. A streamed event with no price keeps
// its unknown label in the ledger, the reported dollars land in the
// adjustment, and the adjustment settles those unknowns (SettlesUnknown):
// the report is the whole call's cost, so the call ends reported. The
// adjustment is one event per agent that has a part of it (splitByAgent),
// so what a sub-agent spent is booked to it, not to the main agent.
func (p *Parser) Reconcile(price func(budget.UsageEvent) budget.UsageEvent) (events []budget.UsageEvent, note string) {
	r := p.result
	if r == nil {
		return nil, ""
	}
	var reported anthropicUsage
	models := make([]string, 0, len(r.ModelUsage))
	for m, u := range r.ModelUsage {
		models = append(models, m)
		reported.Input += u.Input
		reported.Output += u.Output
		reported.CacheRead += u.CacheRead
		reported.CacheWrite += u.CacheWrite
	}
	sort.Strings(models)
	model := p.model
	if len(models) > 0 {
		model = models[0]
	}
	var sum budget.UsageEvent
	for _, id := range p.order {
		sum = usagedelta.Add(sum, p.emitted[id])
	}
	adj, _ := usagedelta.Grow(sum, reported.event(model))
	if r.TotalCostUSD == nil {
		if adj.Tokens() > 0 {
			adj.Agent = p.agentShares(r).largest()
			events = append(events, adj) // priced where it is recorded, like the stream
		}
		return events, ""
	}
	total, err := budget.USDFromFloat(*r.TotalCostUSD)
	if err != nil || total < 0 {
		return nil, "claude reported an unreadable total_cost_usd"
	}
	var streamed budget.Totals
	for _, ev := range p.events {
		if price != nil {
			ev = price(ev)
		}
		streamed.Add(ev)
	}
	known := streamed.USD
	diff := total - known
	if m := p.unpricedByClaudeCode(models); m != "" {
		return p.reconcileGuess(adj, m, total, streamed, price)
	}
	switch {
	case streamed.EstimatedEvents == 0 && streamed.UnknownEvents > 0:
		note = fmt.Sprintf("reported %s; the streamed usage had no known price", total)
	case streamed.EstimatedEvents == 0:
		note = fmt.Sprintf("reported %s", total)
	case diff >= 0:
		note = fmt.Sprintf("reported %s, estimated %s while streaming (difference %s)", total, known, diff)
	default:
		note = fmt.Sprintf("reported %s, estimated %s while streaming: the estimate is kept, %s above the report", total, known, -diff)
		diff = 0
	}
	if len(p.replaced) > 0 {
		note = strings.TrimPrefix(note+"; "+strings.Join(p.replaced, ", "), "; ")
	}
	// The report is the call's full cost: it settles every streamed event
	// that had no price, so a model the catalogue lacks ends reported, not
	// partial.
	if diff > 0 || adj.Tokens() > 0 || streamed.UnknownEvents > 0 {
		events = append(events, p.splitByAgent(adj, total, diff, price, budget.CostReported)...)
	}
	return events, note
}

// unpricedByClaudeCode is the first model of the call Claude Code has no
// price for ("" when it prices them all): the result's models, else the
// stream's.
func (p *Parser) unpricedByClaudeCode(models []string) string {
	if len(models) == 0 {
		for _, ev := range p.events {
			models = append(models, ev.Model)
		}
		sort.Strings(models)
	}
	for _, m := range models {
		if m != "" && !claudeCodePrices(m) {
			return baseModel(m)
		}
	}
	return ""
}

// claudeCodeFamilies are the models Claude Code 2.1 carries prices for, as
// it shortens a model's name (first match wins, as in its own table; the
// bare claude-opus-4 and claude-sonnet-4, dated or not, are the 4.0 models).
// Any other model it prices at its default model's rates, a guess it
// flags only internally (hasUnknownModelCost), never in its result. The
// claude-3 opus, sonnet and haiku are not in its table either.
var claudeCodeFamilies = []string{
	"claude-fable-5", "claude-mythos-5",
	"claude-opus-4-8", "claude-opus-4-7", "claude-opus-4-6", "claude-opus-4-5", "claude-opus-4-1",
	"claude-sonnet-5", "claude-sonnet-4-6", "claude-sonnet-4-5",
	"claude-haiku-4-5", "claude-3-7-sonnet", "claude-3-5-sonnet", "claude-3-5-haiku",
}

// claudeFour is a bare 4.0 name: claude-opus-4 or claude-sonnet-4 not
// followed by a one-digit minor version (a date may follow), as Claude
// Code's /claude-opus-4(?!-\d(?!\d))/ (Go's regexp has no lookahead).
var claudeFour = regexp.MustCompile(`claude-(opus|sonnet)-4($|[^-]|-$|-\D|-\d\d)`)

// claudeCodePrices reports whether Claude Code has its own price for model
// (its total_cost_usd is then its provider's list price, not a guess).
func claudeCodePrices(model string) bool {
	m := strings.ToLower(model)
	for _, f := range claudeCodeFamilies {
		if strings.Contains(m, f) {
			return true
		}
	}
	return claudeFour.MatchString(m)
}

// reconcileGuess reconciles a call whose reported total is Claude Code's
// guess (model is one it has no price for): the guess is no report. When
// Purser priced the whole stream, Purser's estimate stands and the guess
// is only named in the note; otherwise the guessed dollars above what was
// priced count — a budget must still see them — labelled estimated, and
// the usage Purser could not price stays unknown. Tokens the stream missed
// are priced where they are recorded, as the stream was.
func (p *Parser) reconcileGuess(adj budget.UsageEvent, model string, total budget.USD, streamed budget.Totals, price func(budget.UsageEvent) budget.UsageEvent) (events []budget.UsageEvent, note string) {
	note = fmt.Sprintf("claude reported %s, but Claude Code has no price for %s: that figure is its guess at its default model's rates", total, model)
	if adj.Tokens() > 0 {
		adj.Agent = p.agentShares(p.result).largest()
		events = append(events, adj)
	}
	diff := total - streamed.USD
	switch {
	case streamed.UnknownEvents == 0 && streamed.EstimatedEvents > 0:
		note += fmt.Sprintf("; Purser's estimate %s is kept", streamed.USD)
	case diff > 0:
		note += fmt.Sprintf("; %s of it counted as estimated, the usage Purser has no price for stays unknown", diff)
		events = append(events, p.splitByAgent(budget.UsageEvent{Model: adj.Model, ServiceTier: adj.ServiceTier}, total, diff, price, budget.CostEstimated)...)
	default:
		note += fmt.Sprintf("; Purser's estimate %s is kept", streamed.USD)
	}
	if len(p.replaced) > 0 {
		note += "; " + strings.Join(p.replaced, ", ")
	}
	return events, note
}

// agentShares is how a call's reported cost divides among the agents that
// streamed it: the agents in a fixed order (the main agent first, then by
// name) and each one's weight.
type agentShares struct {
	agents  []string
	weights []*big.Rat
}

// largest is the agent with the largest weight; the first such in order.
func (s agentShares) largest() string {
	best := 0
	for i, w := range s.weights {
		if w.Cmp(s.weights[best]) > 0 {
			best = i
		}
	}
	return s.agents[best]
}

// baseModel is a model's name without the context-window tag Claude Code's
// result adds ("claude-opus-4-8[1m]"), as the stream names it.
func baseModel(name string) string {
	if i := strings.IndexByte(name, '['); i > 0 {
		return name[:i]
	}
	return name
}

// agentShares weighs each agent by the part of the reported cost that is
// its own, as far as the result lets tell: the result's modelUsage gives a
// cost per model, not per agent, so each model's cost is shared among the
// agents that streamed that model in proportion to their streamed tokens
// of it. A model the result gives no cost for weighs nothing; when no model
// weighs anything, the agents weigh their streamed tokens; with no streamed
// tokens at all, everything is the main agent's.
func (p *Parser) agentShares(r *Result) agentShares {
	tokens := map[string]map[string]int64{} // per model, per agent
	perModel := map[string]int64{}
	perAgent := map[string]int64{"": 0}
	for _, ev := range p.events {
		m := baseModel(ev.Model)
		if tokens[m] == nil {
			tokens[m] = map[string]int64{}
		}
		tokens[m][ev.Agent] += ev.Tokens()
		perModel[m] += ev.Tokens()
		perAgent[ev.Agent] += ev.Tokens()
	}
	s := agentShares{agents: make([]string, 0, len(perAgent))}
	for a := range perAgent {
		s.agents = append(s.agents, a)
	}
	sort.Strings(s.agents) // "" sorts first: the main agent
	byCost := map[string]*big.Rat{}
	total := new(big.Rat)
	for name, u := range r.ModelUsage {
		cost, err := budget.USDFromFloat(u.CostUSD)
		m := baseModel(name)
		if err != nil || cost <= 0 || perModel[m] == 0 {
			continue
		}
		for a, n := range tokens[m] {
			w := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(int64(cost)), big.NewInt(n)), big.NewInt(perModel[m]))
			if byCost[a] == nil {
				byCost[a] = new(big.Rat)
			}
			byCost[a].Add(byCost[a], w)
			total.Add(total, w)
		}
	}
	for _, a := range s.agents {
		w := new(big.Rat)
		switch {
		case total.Sign() > 0:
			if byCost[a] != nil {
				w.Set(byCost[a])
			}
		default:
			w.SetInt64(perAgent[a])
		}
		s.weights = append(s.weights, w)
	}
	if len(s.agents) == 1 {
		s.weights[0].SetInt64(1) // the main agent alone, streamed tokens or not
	}
	return s
}

// splitByAgent turns the reconciliation into one reported adjustment per
// agent, so that a sub-agent's share is booked to it, not to the main
// agent:
//   - the reported total is apportioned by agentShares (each agent's share
//     of the report), and each agent's shortfall is its share less what its
//     streamed events were priced at. The dollars of the adjustment (diff,
//     the report less the whole streamed estimate) go by those shortfalls:
//     exactly each one's when none is negative (every agent then lands on
//     its share to the nano-dollar), else in proportion to the positive
//     ones — in whole nano-dollars summing exactly to diff either way;
//   - each agent's adjustment settles exactly its own streamed events that
//     had no price;
//   - the tokens the stream missed (adj's) are not split — the result does
//     not say whose they are, and splitting each kind of token apart could
//     leave a part with more cache reads than input — and go to the agent
//     with the largest share.
//
// src is the adjustment's cost source: reported, or estimated when the
// total is Claude Code's guess (an estimate settles nothing).
func (p *Parser) splitByAgent(adj budget.UsageEvent, total, diff budget.USD, price func(budget.UsageEvent) budget.UsageEvent, src budget.CostSource) []budget.UsageEvent {
	shares := p.agentShares(p.result)
	unknown := map[string]int64{}
	known := map[string]budget.USD{}
	for _, ev := range p.events {
		if price != nil {
			ev = price(ev)
		}
		known[ev.Agent] += ev.USD
		if ev.CostSource == budget.CostUnknown {
			unknown[ev.Agent]++
		}
	}
	targets := budget.Apportion(int64(total), shares.weights)
	shortfalls := make([]*big.Rat, len(targets))
	var sum int64
	for i, agent := range shares.agents {
		short := max(targets[i]-int64(known[agent]), 0)
		shortfalls[i] = big.NewRat(short, 1)
		sum += short
	}
	var dollars []int64
	switch {
	case sum == int64(diff):
		dollars = make([]int64, len(targets))
		for i, r := range shortfalls {
			dollars[i] = r.Num().Int64()
		}
	case sum > 0:
		dollars = budget.Apportion(int64(diff), shortfalls)
	default:
		dollars = budget.Apportion(int64(diff), shares.weights)
	}
	tokensTo := shares.largest()
	var out []budget.UsageEvent
	for i, agent := range shares.agents {
		ev := budget.UsageEvent{Model: adj.Model, ServiceTier: adj.ServiceTier}
		if agent == tokensTo {
			ev = adj
		}
		ev.Agent, ev.USD, ev.CostSource = agent, budget.USD(dollars[i]), src
		if src == budget.CostReported {
			ev.SettlesUnknown = unknown[agent]
		}
		if ev.USD > 0 || ev.Tokens() > 0 || ev.SettlesUnknown > 0 {
			out = append(out, ev)
		}
	}
	return out
}

// transcriptLine is one line of a Claude Code session transcript. A
// sub-agent's lines are sidechain lines: Claude Code 2.1 writes them to a
// transcript of their own (<session>/subagents/agent-<agentId>.jsonl beside
// the session's), each carrying isSidechain and the sub-agent's agentId;
// earlier versions wrote them into the session's transcript, marked
// isSidechain only. The main transcript links an agentId to the Task
// tool_use that started it in the tool_result that ends it.
type transcriptLine struct {
	Type        string          `json:"type"`
	IsSidechain bool            `json:"isSidechain"`
	AgentID     string          `json:"agentId"`
	Message     json.RawMessage `json:"message"`
	// ToolUseResult is, on a Task's tool_result line, an object naming the
	// sub-agent's agentId (a string on a failed tool).
	ToolUseResult json.RawMessage `json:"toolUseResult"`
}

// toolResults is a user message's content as far as it ends tool uses.
type toolResults struct {
	Content []struct {
		Type      string          `json:"type"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
	} `json:"content"`
}

// agentIDInText finds the agentId a Task's result text states ("agentId:
// a1b2c3d", or a team agent's "agent_id: name@team"), for a line whose
// toolUseResult does not give it.
var agentIDInText = regexp.MustCompile(`\bagent(?:Id|_id): ?([A-Za-z0-9_@.-]+)`)

// sidechainAgent names sub-agent work in a transcript that does not say
// which sub-agent did it (a sidechain line without an agentId).
const sidechainAgent = "sidechain"

// FeedTranscript reads one line of the session transcript, or of one of
// its sub-agents' transcripts, which keep each message's final usage even
// when the CLI was killed, and returns what the stream had not reported.
// A sub-agent's messages are booked to it: by the name of the Task that
// started it when the session's transcript (read first) linked its agentId
// to that Task, else as "agent-<agentId>", else (an older transcript's
// sidechain line without an agentId) as "sidechain".
func (p *Parser) FeedTranscript(b []byte) []budget.UsageEvent {
	var l transcriptLine
	if json.Unmarshal(b, &l) != nil || len(l.Message) == 0 {
		return nil
	}
	switch l.Type {
	case "user":
		p.linkAgentIDs(l)
		return nil
	case "assistant":
	default:
		return nil
	}
	var m apiMessage
	if json.Unmarshal(l.Message, &m) != nil {
		return nil
	}
	p.nameSubAgents(m.Content)
	if m.Usage == nil || m.ID == "" {
		return nil
	}
	if l.IsSidechain && p.agentOf[m.ID] == "" {
		switch tool := p.agentTools[l.AgentID]; {
		case tool != "":
			p.attribute(m.ID, tool)
		case l.AgentID != "":
			p.agentOf[m.ID] = "agent-" + l.AgentID
		default:
			p.agentOf[m.ID] = sidechainAgent
		}
	}
	return p.observe(m.ID, m.Model, *m.Usage)
}

// linkAgentIDs remembers, from a Task's tool_result, which tool_use started
// the sub-agent with which agentId.
func (p *Parser) linkAgentIDs(l transcriptLine) {
	var tr toolResults
	if json.Unmarshal(l.Message, &tr) != nil {
		return // a prompt: its content is a string
	}
	var res struct {
		AgentID string `json:"agentId"`
	}
	_ = json.Unmarshal(l.ToolUseResult, &res) // a string on a failed tool
	for _, c := range tr.Content {
		if c.Type != "tool_result" || c.ToolUseID == "" {
			continue
		}
		id := res.AgentID
		if id == "" {
			if m := agentIDInText.FindStringSubmatch(resultText(c.Content)); m != nil {
				id = m[1]
			}
		}
		if id != "" {
			p.agentTools[id] = c.ToolUseID
		}
	}
}

// resultText is a tool_result's content as text: a string, or the text
// blocks of a list.
func resultText(content json.RawMessage) string {
	var text string
	if json.Unmarshal(content, &text) == nil {
		return text
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(content, &blocks) // neither: no text to read
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// subAgentTranscripts lists the transcripts of a session's sub-agents,
// beside its transcript file (Claude Code 2.1's layout), in name order.
func subAgentTranscripts(sessions []string) []string {
	var out []string
	for _, s := range sessions {
		m, _ := filepath.Glob(filepath.Join(strings.TrimSuffix(s, ".jsonl"), "subagents", "agent-*.jsonl"))
		out = append(out, m...)
	}
	return out
}
