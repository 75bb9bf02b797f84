// Package selfexec runs the running program again as a child process, for
// the examples that show a crash: the program plays the parent, which
// starts children and kills one with SIGKILL, and the child, which it is
// when an environment variable says so.
package selfexec

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
)

// Main runs the program: as a child (env set in its environment) child,
// with the variable's value; else parent, with the path of the program's
// own executable to start children with. It exits with status 1 if the one
// it runs fails.
func Main(env string, child func(value string) error, parent func(exe string) error) {
	Child(env, child)
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	if err := parent(self); err != nil {
		log.Fatal(err)
	}
}

// Child runs child, with env's value, and exits if this process is a child
// (env set): with status 1, after printing the error on its standard output
// where the parent reads it, if child fails. Otherwise it returns. A test
// binary calls it first in TestMain.
func Child(env string, child func(value string) error) {
	v := os.Getenv(env)
	if v == "" {
		return
	}
	if err := child(v); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Process is a child process; Lines reads its standard output line by line.
type Process struct {
	Lines *bufio.Scanner
	cmd   *exec.Cmd
}

// Start starts exe with args, and env added to the environment.
func Start(ctx context.Context, exe string, args []string, env ...string) (*Process, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Process{Lines: bufio.NewScanner(out), cmd: cmd}, nil
}

// Kill kills the process with SIGKILL, so that none of its cleanup runs,
// and waits for it to exit.
func (p *Process) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	_ = p.cmd.Wait() // "signal: killed"
	return nil
}

// Wait waits for the process to exit; an exit status other than 0 is an
// error.
func (p *Process) Wait() error { return p.cmd.Wait() }
