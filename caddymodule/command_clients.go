package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// addClientCommands adds `caddy palmgate client add|list|show|update|rotate-secret|remove`,
// which call the admin API of a running Caddy (admin_clients.go).
func addClientCommands(parent *cobra.Command) {
	client := &cobra.Command{
		Use:   "client add|list|show|update|rotate-secret|remove",
		Short: "Manages OpenID Connect clients through the admin API of a running Caddy",
		Long: `
Manages palmgate's OpenID Connect clients on a running Caddy, through its admin
API: the dynamic clients (those the developer portal and these commands create)
can be changed; the clients of the Caddyfile are listed read-only.

Every subcommand takes --address (the admin API's address, if not the default),
or --config and --adapter to find it, and --json to print JSON instead of a table.
`,
	}
	common := func(c *cobra.Command) *cobra.Command {
		adminFlags(c)
		c.RunE = plainCommand(func(fs caddycmd.Flags) (int, error) { return runClientCommand(c.Name(), fs) })
		client.AddCommand(c)
		return c
	}
	add := common(&cobra.Command{Use: "add --name <name> --redirect-uri <uri> [--redirect-uri <uri>...] [--sector <id>] [--post-logout-redirect-uri <uri>...] [--backchannel-logout-uri <url>] [--id-token-alg RS256|ES256|EdDSA] [--public] [--allowed-origin <origin>...]",
		Short: "Creates a client and prints its client_id and client_secret (shown once; a --public client has none)", Args: cobra.NoArgs})
	add.Flags().Bool("public", false, "A public client (browser or native app): no secret, PKCE S256 required")
	add.Flags().String("name", "", "Display name, shown on the login page")
	add.Flags().StringArray("redirect-uri", nil, "A redirect URI (repeatable)")
	add.Flags().String("sector", "", "Pairwise sector (default: the client_id)")
	logoutFlags(add)
	common(&cobra.Command{Use: "list", Short: "Lists the clients", Args: cobra.NoArgs})
	common(&cobra.Command{Use: "show <client_id>", Short: "Shows a client", Args: cobra.ExactArgs(1)})
	update := common(&cobra.Command{Use: "update <client_id> [--name <name>] [--redirect-uri <uri>...] [--sector <id>] [--post-logout-redirect-uri <uri>...] [--backchannel-logout-uri <url>] [--id-token-alg <alg>] [--access-token-audience <aud>] [--allowed-origin <origin>...]",
		Short: "Changes a client's name, redirect URIs (all replaced), sector, post-logout redirect URIs (all replaced; \"\" clears them), back-channel logout URI (\"\" removes it), ID token algorithm, access token audience or allowed origins; at least one", Args: cobra.ExactArgs(1)})
	update.Flags().String("name", "", "New display name")
	update.Flags().StringArray("redirect-uri", nil, "The new redirect URIs (repeatable; replace all)")
	update.Flags().String("sector", "", "New pairwise sector")
	logoutFlags(update)
	rotate := common(&cobra.Command{Use: "rotate-secret <client_id> [--grace 24h]",
		Short: "Issues a new secret (printed once); the current one works for --grace more, older ones stop at once", Args: cobra.ExactArgs(1)})
	rotate.Flags().String("grace", "24h", "How long the current secret keeps working (0s: stops at once); a secret rotated out before stops at once")
	common(&cobra.Command{Use: "remove <client_id>", Short: "Deletes a client and revokes its grants", Args: cobra.ExactArgs(1)})
	parent.AddCommand(client)
}

// logoutFlags adds the flags of RP-initiated logout, of the ID token's algorithm
// and of the access token's audience.
func logoutFlags(c *cobra.Command) {
	c.Flags().StringArray("post-logout-redirect-uri", nil, "Where /oauth2/logout may send the browser back (repeatable; replace all)")
	c.Flags().String("backchannel-logout-uri", "", "Where palmgate POSTs a logout token when it ends one of the client's logins (OpenID Connect Back-Channel Logout; \"\" removes it)")
	c.Flags().String("id-token-alg", "", "The ID tokens' signing algorithm (id_token_signed_response_alg): RS256 (default), ES256 or EdDSA")
	c.Flags().String("access-token-audience", "", "The access tokens' aud without a resource: base_url (default), client_id or both")
	c.Flags().StringArray("allowed-origin", nil, "An origin whose browser pages may call the token endpoint for it (CORS; repeatable; replace all; \"\" clears them)")
}

// logoutBody sets the flags of logoutFlags that were given in body.
func logoutBody(fs caddycmd.Flags, body map[string]any) {
	if fs.Changed("post-logout-redirect-uri") {
		var uris []string
		for _, u := range stringArray(fs, "post-logout-redirect-uri") {
			if u != "" { // --post-logout-redirect-uri "" clears them
				uris = append(uris, u)
			}
		}
		body["post_logout_redirect_uris"] = append([]string{}, uris...)
	}
	if fs.Changed("backchannel-logout-uri") {
		body["backchannel_logout_uri"] = fs.String("backchannel-logout-uri")
	}
	if fs.Changed("id-token-alg") {
		body["id_token_signed_response_alg"] = fs.String("id-token-alg")
	}
	if fs.Changed("access-token-audience") {
		body["access_token_audience"] = fs.String("access-token-audience")
	}
	if fs.Changed("allowed-origin") {
		origins := []string{}
		for _, o := range stringArray(fs, "allowed-origin") {
			if o != "" {
				origins = append(origins, o)
			}
		}
		body["allowed_origins"] = origins
	}
}

func runClientCommand(name string, fs caddycmd.Flags) (int, error) {
	id := url.PathEscape(fs.Arg(0))
	body := map[string]any{}
	var method, path string
	switch name {
	case "add":
		if err := requireClientFlags(fs); err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
		method, path = http.MethodPost, "/palmgate/clients"
		body["name"], body["redirect_uris"] = fs.String("name"), stringArray(fs, "redirect-uri")
		if s := fs.String("sector"); s != "" {
			body["sector"] = s
		}
		if fs.Bool("public") {
			body["public"] = true
		}
		logoutBody(fs, body)
	case "list":
		method, path = http.MethodGet, "/palmgate/clients"
	case "show":
		method, path = http.MethodGet, "/palmgate/clients/"+id
	case "update":
		method, path = http.MethodPatch, "/palmgate/clients/"+id
		for flag, key := range map[string]string{"name": "name", "sector": "sector"} {
			if fs.Changed(flag) {
				body[key] = fs.String(flag)
			}
		}
		if fs.Changed("redirect-uri") {
			body["redirect_uris"] = stringArray(fs, "redirect-uri")
		}
		logoutBody(fs, body)
		if len(body) == 0 {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("nothing to change: give at least one of --name, --redirect-uri, --sector, --post-logout-redirect-uri, --backchannel-logout-uri, --id-token-alg, --access-token-audience or --allowed-origin")
		}
	case "rotate-secret":
		if _, err := caddy.ParseDuration(fs.String("grace")); err != nil {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("--grace %q: not a duration; give one such as 24h, 90m or 0s (0s: the current secret stops at once)", fs.String("grace"))
		}
		method, path = http.MethodPost, "/palmgate/clients/"+id+"/rotate-secret"
		body["grace"] = fs.String("grace")
	case "remove":
		method, path = http.MethodDelete, "/palmgate/clients/"+id
	}
	var sent any
	if method == http.MethodPost || method == http.MethodPatch {
		sent = body
	}
	out, err := callAdminAPI(fs, method, path, sent)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if name == "remove" {
		if fs.Bool("json") {
			fmt.Printf("{\"client_id\":%q,\"removed\":true}\n", fs.Arg(0))
		} else {
			fmt.Printf("removed %s\n", fs.Arg(0))
		}
		return caddy.ExitCodeSuccess, nil
	}
	if fs.Bool("json") {
		os.Stdout.Write(out)
		return caddy.ExitCodeSuccess, nil
	}
	return printClients(out, name == "list")
}

func stringArray(fs caddycmd.Flags, name string) []string {
	v, _ := fs.GetStringArray(name)
	if v == nil {
		v = []string{}
	}
	return v
}

// adminClient is a client as the admin API answers it.
type adminClient struct {
	ID             string   `json:"client_id"`
	Name           string   `json:"name"`
	RedirectURIs   []string `json:"redirect_uris"`
	Sector         string   `json:"sector"`
	Owner          string   `json:"owner"`
	Static         bool     `json:"static"`
	Secret         string   `json:"client_secret"`
	PreviousExpiry string   `json:"previous_secret_expires_at"`
	UpdatedAt      string   `json:"updated_at"`
	PostLogout     []string `json:"post_logout_redirect_uris"`
	IDTokenAlg     string   `json:"id_token_signed_response_alg"`
	Backchannel    string   `json:"backchannel_logout_uri"`
	AccessAud      string   `json:"access_token_audience"`
	AuthMethod     string   `json:"token_endpoint_auth_method"`
	Origins        []string `json:"allowed_origins"`
}

func printClients(out []byte, list bool) (int, error) {
	var clients []adminClient
	if list {
		if err := json.Unmarshal(out, &clients); err != nil {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("decoding the admin API's answer: %v", err)
		}
	} else {
		var c adminClient
		if err := json.Unmarshal(out, &c); err != nil {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("decoding the admin API's answer: %v", err)
		}
		clients = []adminClient{c}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	if list {
		fmt.Fprintln(tw, "CLIENT_ID\tNAME\tKIND\tREDIRECT_URIS")
		for _, c := range clients {
			kind := "dynamic"
			if c.Static {
				kind = "static"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.ID, c.Name, kind, strings.Join(c.RedirectURIs, " "))
		}
		return caddy.ExitCodeSuccess, tw.Flush()
	}
	c := clients[0]
	fmt.Fprintf(tw, "client_id\t%s\n", c.ID)
	if c.Secret != "" {
		fmt.Fprintf(tw, "client_secret\t%s\t(shown once)\n", c.Secret)
	}
	fmt.Fprintf(tw, "name\t%s\n", c.Name)
	fmt.Fprintf(tw, "redirect_uris\t%s\n", strings.Join(c.RedirectURIs, " "))
	fmt.Fprintf(tw, "sector\t%s\n", c.Sector)
	fmt.Fprintf(tw, "post_logout_redirect_uris\t%s\n", strings.Join(c.PostLogout, " "))
	fmt.Fprintf(tw, "backchannel_logout_uri\t%s\n", c.Backchannel)
	fmt.Fprintf(tw, "id_token_signed_response_alg\t%s\n", c.IDTokenAlg)
	fmt.Fprintf(tw, "access_token_audience\t%s\n", c.AccessAud)
	fmt.Fprintf(tw, "token_endpoint_auth_method\t%s\n", c.AuthMethod)
	fmt.Fprintf(tw, "allowed_origins\t%s\n", strings.Join(c.Origins, " "))
	if c.Static {
		fmt.Fprintln(tw, "kind\tstatic (Caddyfile; read-only)")
	}
	if c.Owner != "" {
		fmt.Fprintln(tw, "owner\ta portal developer")
	}
	if !c.Static && c.AuthMethod != "none" {
		fmt.Fprintln(tw, "current secret works\tuntil rotated")
	}
	if c.PreviousExpiry != "" { // only while it works
		fmt.Fprintf(tw, "previous secret works until\t%s\n", cliTime(c.PreviousExpiry))
	}
	return caddy.ExitCodeSuccess, tw.Flush()
}

// requireClientFlags checks that `client add` was given the flags a client needs,
// naming the missing flag (the admin API would name its JSON field).
func requireClientFlags(fs caddycmd.Flags) error {
	switch {
	case strings.TrimSpace(fs.String("name")) == "":
		return errors.New("--name is required: the application's name, which the login page shows (such as --name \"My App\")")
	case len(stringArray(fs, "redirect-uri")) == 0:
		return errors.New("--redirect-uri is required: where the login returns to the application (such as --redirect-uri https://app.example.com/callback; repeat it for several)")
	}
	return nil
}
