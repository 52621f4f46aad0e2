package demo_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/caddyauth"

	// The palmgate global option and directive, which register the demo too.
	_ "github.com/palmgate/palmgate/caddymodule"
)

// TestCaddyfileAdapt pins the directive: its JSON, and its place right after
// palmgate in the route whatever order the site block lists them in.
func TestCaddyfileAdapt(t *testing.T) {
	in := "{\n\tpalmgate {\n\t\tissuer http://localhost:8080\n\t\tdev\n\t}\n}\n" +
		":8080 {\n\tbasic_auth /private/* {\n\t\tu $2a$14$Zkx19XLiW6VYouLHR5NmfOFU0z2GTNmpkT/5qqR7hx4IjWJPDhjvG\n\t}\n\tpalmgate_demo demo\n\tpalmgate\n}\n"
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(in), nil)
	if err != nil {
		t.Fatalf("adapting: %v", err)
	}
	var parsed struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Routes []struct {
						Handle []json.RawMessage `json:"handle"`
					} `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(cfg, &parsed); err != nil {
		t.Fatal(err)
	}
	var handlers []string
	for _, srv := range parsed.Apps.HTTP.Servers {
		for _, route := range srv.Routes {
			for _, h := range route.Handle {
				var name struct {
					Handler string `json:"handler"`
				}
				_ = json.Unmarshal(h, &name)
				handlers = append(handlers, name.Handler)
				if name.Handler == "palmgate_demo" && string(h) != `{"client_id":"demo","handler":"palmgate_demo"}` {
					t.Errorf("palmgate_demo adapts to %s", h)
				}
			}
		}
	}
	got := strings.Join(handlers, " ")
	if !strings.Contains(got, "palmgate palmgate_demo") || strings.Index(got, "palmgate_demo") > strings.Index(got, "authentication") {
		t.Errorf("handlers in route order: %s; want palmgate, then palmgate_demo, then basic_auth's authentication", got)
	}
}
