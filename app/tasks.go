package app

import (
	"fmt"
	"os"
	"os/user"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/config"
)

// LoadTasks reads the task files with load; two files may not share a task
// id. The project is the first task's. Every error is bad input.
func LoadTasks(load LoadTaskFunc, paths []string) ([]purser.Task, *config.Project, error) {
	var tasks []purser.Task
	var proj *config.Project
	ids := map[string]string{}
	for _, path := range paths {
		t, p, err := load(path)
		if err != nil {
			return nil, nil, BadInput(err)
		}
		if other, ok := ids[t.ID]; ok {
			return nil, nil, BadInput(fmt.Errorf("%s: task id %q is also the id of %s", path, t.ID, other))
		}
		ids[t.ID] = path
		if proj == nil {
			proj = p
		}
		tasks = append(tasks, t)
	}
	return tasks, proj, nil
}

// Whoami names the user for records of their acts: user@host.
func Whoami() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
