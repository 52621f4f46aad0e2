package caddymodule

import (
	"fmt"
	"os"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// Every `caddy palmgate` command reports an error as one plain line on stderr,
// "caddy palmgate <command>: <what is wrong and how to fix it>", and exits with
// status 1: not a log entry with the message escaped inside (what Caddy's
// caddycmd.WrapCommandFuncForCobra prints), nor cobra's "Error:" and usage.

// plainErrors runs a command whose errors are one plain line on stderr.
func plainErrors(run func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := run(cmd, args)
		if err != nil {
			printPlain(cmd, err)
		}
		return err
	}
}

// plainCommand is plainErrors for a command written as a caddycmd.CommandFunc.
func plainCommand(run caddycmd.CommandFunc) func(*cobra.Command, []string) error {
	return plainErrors(func(cmd *cobra.Command, _ []string) error {
		_, err := run(caddycmd.Flags{FlagSet: cmd.Flags()})
		return err
	})
}

// printPlain prints err as the command's one line, and keeps cobra and Caddy
// from printing it again.
func printPlain(cmd *cobra.Command, err error) {
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	fmt.Fprintf(os.Stderr, "%s: %s\n", cmd.CommandPath(), strings.Join(strings.Fields(err.Error()), " "))
}

// plainTree makes the argument and flag errors of every command under root one
// plain line too, pointing at the command's usage.
func plainTree(root *cobra.Command) {
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		printPlain(cmd, fmt.Errorf("%v; usage: %s", err, usage(cmd)))
		return err
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				err := args(cmd, a)
				if err != nil {
					printPlain(cmd, fmt.Errorf("%v; usage: %s", err, usage(cmd)))
				}
				return err
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// usage is the command's synopsis: its path and the arguments its Use names.
func usage(cmd *cobra.Command) string {
	_, rest, _ := strings.Cut(cmd.Use, " ")
	return strings.TrimSpace(cmd.CommandPath() + " " + rest)
}

// cliTime prints an RFC 3339 instant the admin API or a page answered (perhaps
// with a fraction of a second) as RFC 3339 in UTC to the second, as every
// command prints times; what does not parse is printed as it came.
func cliTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format(time.RFC3339)
}
