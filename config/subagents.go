package config

import (
	"fmt"
	"strings"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// subAgentsFile is the written form of subAgents: (purser.SubAgentLimits):
//
//	subAgents: {maxSpawn: 8, each: {usd: 0.50, tokens: 200000}}
type subAgentsFile struct {
	MaxSpawn *int `yaml:"maxSpawn"`
	Each     *struct {
		USD    *budget.USD `yaml:"usd"`
		Tokens *int64      `yaml:"tokens"`
	} `yaml:"each"`
}

// subAgents reads the task's subAgents:, else the project's.
func (r *taskReader) subAgents() {
	switch {
	case r.tf.SubAgents != nil:
		lim, errs := readSubAgents(r.d, *r.tf.SubAgents, "subAgents.")
		r.errs = append(r.errs, errs...)
		r.t.SubAgents = lim
	case r.proj != nil:
		r.t.SubAgents = r.proj.SubAgents
	}
}

// readSubAgents checks a subAgents: mapping, locating each problem under
// prefix: a count of spawns from 0, caps above 0, at least one of them.
func readSubAgents(d *document, f subAgentsFile, prefix string) (purser.SubAgentLimits, []error) {
	var lim purser.SubAgentLimits
	var errs []error
	if f.MaxSpawn != nil {
		if *f.MaxSpawn < 0 {
			errs = append(errs, d.at(prefix+"maxSpawn", fmt.Sprintf("%d: want 0 or more sub-agents (0 refuses every spawn)", *f.MaxSpawn), nil))
		}
		lim.MaxSpawn = f.MaxSpawn
	}
	if f.Each != nil {
		if f.Each.USD != nil && *f.Each.USD <= 0 {
			errs = append(errs, d.at(prefix+"each.usd", fmt.Sprintf("%s: want more than $0 (leave it out for no cap)", *f.Each.USD), nil))
		}
		if f.Each.Tokens != nil && *f.Each.Tokens <= 0 {
			errs = append(errs, d.at(prefix+"each.tokens", fmt.Sprintf("%d: want more than 0 (leave it out for no cap)", *f.Each.Tokens), nil))
		}
		if f.Each.USD == nil && f.Each.Tokens == nil {
			errs = append(errs, d.at(prefix+"each", "caps nothing: want usd, tokens or both", nil))
		}
		lim.Each = purser.SubAgentCap{USD: f.Each.USD, Tokens: f.Each.Tokens}
	}
	if f.MaxSpawn == nil && f.Each == nil {
		errs = append(errs, d.at(strings.TrimSuffix(prefix, "."), "caps nothing: want maxSpawn, each or both", nil))
	}
	return lim, errs
}
