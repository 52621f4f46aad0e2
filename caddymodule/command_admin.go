package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"
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

// adminFix is how to name the admin API's address, said when it cannot be reached.
const adminFix = `give the admin API's address with --address (the "admin" global option; by default localhost:2019) or --config <Caddyfile>`

// callAdminAPI sends method path (with body as JSON, when not nil) to the admin API
// that adminFlags name, and returns its JSON answer (at most 16 MiB). An answer that
// is not 2xx is an error saying what the admin API answered, in the CLI's words.
func callAdminAPI(fs caddycmd.Flags, method, path string, body any) ([]byte, error) {
	resp, err := adminAPIResponse(fs, method, path, body, "application/json")
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

// adminQuery calls the admin API for a command that prints its answer: with
// --json the answer is printed as it came (printed is true), otherwise it is
// decoded into a T for the command to print in its own words.
func adminQuery[T any](fs caddycmd.Flags, method, path string, body any) (v T, printed bool, err error) {
	out, err := callAdminAPI(fs, method, path, body)
	if err != nil {
		return v, false, err
	}
	if fs.Bool("json") {
		_, err := os.Stdout.Write(out)
		return v, true, err
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return v, false, fmt.Errorf("decoding the admin API's answer: %v", err)
	}
	return v, false, nil
}

// adminAPIResponse is callAdminAPI's request, answering the response for the caller
// to read (and close): for an answer too large to hold in memory (a backup). A 2xx
// answer whose media type is not want did not come from palmgate's admin routes.
func adminAPIResponse(fs caddycmd.Flags, method, path string, body any, want string) (*http.Response, error) {
	addr, source, err := adminAddress(fs)
	if err != nil {
		return nil, err
	}
	na, err := caddy.ParseNetworkAddress(addr)
	if err != nil || na.PortRangeSize() > 1 {
		return nil, fmt.Errorf("%s is not an address (host:port, or unix/<path>); %s", source, adminFix)
	}
	var reqBody io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		reqBody = bytes.NewReader(b)
	}
	// As caddycmd.AdminAPIRequest does: the admin API checks the Origin of TCP
	// requests, and a socket's host is a placeholder.
	origin := "http://" + na.JoinHostPort(0)
	if na.IsUnixNetwork() || na.IsFdNetwork() {
		origin = "http://127.0.0.1"
	}
	req, err := http.NewRequest(method, origin+path, reqBody)
	if err != nil {
		return nil, fmt.Errorf("%s is not an address (host:port, or unix/<path>); %s", source, adminFix)
	}
	if !na.IsUnixNetwork() && !na.IsFdNetwork() {
		req.Header.Set("Origin", origin)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	client := http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, na.Network, na.JoinHostPort(0))
		},
		ResponseHeaderTimeout: 2 * time.Minute,
	}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("nothing answers at %s (%s): is Caddy running, with its admin API on (not admin off)? Start it, or %s", source, netCause(err), adminFix)
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		// Caddy's admin API answers an error as {"error": "..."} (caddy.APIError),
		// and nothing more: a site's JSON error has other members too.
		var e map[string]any
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if mediaType == "application/json" && json.Unmarshal(b, &e) == nil && len(e) == 1 {
			if msg, ok := e["error"].(string); ok && msg != "" {
				return nil, errors.New(adminMessage(msg))
			}
		}
		return nil, notAdmin(source, resp.StatusCode, mediaType)
	}
	// A 204 (a client removed) has no body, so no media type.
	if mediaType != want && resp.StatusCode != http.StatusNoContent {
		resp.Body.Close()
		return nil, notAdmin(source, resp.StatusCode, mediaType)
	}
	return resp, nil
}

// adminAddress returns the admin API's address, from --address, --config or
// Caddy's default, and how to name it in a message.
func adminAddress(fs caddycmd.Flags) (addr, source string, err error) {
	if a := fs.String("address"); a != "" {
		return a, "--address " + a, nil
	}
	if c := fs.String("config"); c != "" {
		cfg, _, _, err := caddycmd.LoadConfig(c, fs.String("adapter"))
		if err != nil {
			return "", "", fmt.Errorf("--config %s: %v", c, err)
		}
		var admin struct {
			Admin *caddy.AdminConfig `json:"admin"`
		}
		if json.Unmarshal(cfg, &admin) == nil && admin.Admin != nil && admin.Admin.Disabled {
			return "", "", fmt.Errorf("--config %s turns Caddy's admin API off (admin off): the palmgate commands work through it; "+
				"give the admin global option a local address instead (such as admin localhost:2019) and restart Caddy", c)
		}
		addr, err := caddycmd.DetermineAdminAPIAddress("", cfg, c, fs.String("adapter"))
		if err != nil {
			return "", "", fmt.Errorf("--config %s: %v", c, err)
		}
		return addr, fmt.Sprintf("the admin address %s of --config %s", addr, c), nil
	}
	addr, _ = caddycmd.DetermineAdminAPIAddress("", nil, "", "")
	return addr, "the default admin address " + addr, nil
}

// notAdmin is the error of an answer that did not come from Caddy's admin API:
// most likely --address names a site.
func notAdmin(source string, status int, mediaType string) error {
	if mediaType == "" {
		mediaType = "no content type"
	}
	return fmt.Errorf("%s is not Caddy's admin API: it answered %d with %s, not the admin API's JSON (a site's address?); %s",
		source, status, mediaType, strings.Replace(adminFix, " or --config <Caddyfile>", "", 1))
}

// netCause is what went wrong reaching the admin API, in a few words.
func netCause(err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ENOENT):
		return "no such socket"
	case errors.As(err, &dnsErr):
		return "no such host"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT):
		return "timed out"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return opErr.Err.Error()
	}
	return err.Error()
}

// flagOfField names the command-line flag of each field the admin API names in
// its errors.
var flagOfField = map[string]string{
	"name":                         "--name",
	"redirect_uri":                 "--redirect-uri",
	"redirect_uris":                "--redirect-uri",
	"sector":                       "--sector",
	"post_logout_redirect_uri":     "--post-logout-redirect-uri",
	"post_logout_redirect_uris":    "--post-logout-redirect-uri",
	"id_token_signed_response_alg": "--id-token-alg",
	"access_token_audience":        "--access-token-audience",
	"allowed_origin":               "--allowed-origin",
	"allowed_origins":              "--allowed-origin",
	"grace":                        "--grace",
	"alg":                          "--alg",
	"owner":                        "<owner>",
}

// adminMessage is an admin API error message in the CLI's words: a field it
// starts with (`redirect_uri "ftp://x": ...`) becomes the flag that sets it.
func adminMessage(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ") // one line
	end := strings.IndexAny(msg, ": ")
	if end < 0 {
		return msg
	}
	if flag, ok := flagOfField[msg[:end]]; ok {
		return flag + msg[end:]
	}
	return msg
}

// exitCode is a command's exit status for err: success for nil.
func exitCode(err error) int {
	if err != nil {
		return caddy.ExitCodeFailedStartup
	}
	return caddy.ExitCodeSuccess
}
