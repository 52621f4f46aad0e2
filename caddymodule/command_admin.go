package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// adminFlags adds the flags of a command that calls the admin API of a running
// Caddy: --address, or --config and --adapter to find it, and --json.
func adminFlags(c *cobra.Command) {
	c.Flags().String("address", "", "The address to use to reach the admin API endpoint, if not the default")
	c.Flags().StringP("config", "c", "", "Configuration file to use to find the admin API address")
	c.Flags().StringP("adapter", "a", "", "Name of config adapter to apply (when --config is used)")
	c.Flags().Bool("json", false, "Print JSON")
}

// callAdminAPI sends method path (with body as JSON, when not nil) to the admin API
// that adminFlags name, and returns its answer (at most 16 MiB). An answer that is
// not 2xx is an error saying what the admin API answered.
func callAdminAPI(fs caddycmd.Flags, method, path string, body any) ([]byte, error) {
	resp, err := adminAPIResponse(fs, method, path, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the admin API's answer: %v", err)
	}
	return out, nil
}

// adminAPIResponse is callAdminAPI's request, answering the response for the caller
// to read (and close): for an answer too large to hold in memory (a backup).
func adminAPIResponse(fs caddycmd.Flags, method, path string, body any) (*http.Response, error) {
	addr, err := caddycmd.DetermineAdminAPIAddress(fs.String("address"), nil, fs.String("config"), fs.String("adapter"))
	if err != nil {
		return nil, fmt.Errorf("finding the admin API address: %v", err)
	}
	var reqBody io.Reader
	headers := http.Header{}
	if body != nil {
		b, _ := json.Marshal(body)
		reqBody = bytes.NewReader(b)
		headers.Set("Content-Type", "application/json")
	}
	resp, err := caddycmd.AdminAPIRequest(addr, method, path, headers, reqBody)
	if err != nil {
		return nil, err // it says what the admin API answered
	}
	return resp, nil
}
