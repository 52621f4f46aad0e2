// Package negotiate holds the one rule by which palmgate's HTTP handlers (edge
// and portal) choose between a page and JSON for the same answer.
package negotiate

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// AcceptsHTML reports whether r asks for a page rather than JSON: its Accept
// header names text/html (with a q above zero), as every browser's navigation
// does, and does not name application/json. An app, a script or curl that sends
// no Accept, */* or application/json gets JSON.
func AcceptsHTML(r *http.Request) bool {
	html := false
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			if q, err := strconv.ParseFloat(params["q"], 64); err == nil && q <= 0 {
				continue
			}
			switch mt {
			case "application/json":
				return false
			case "text/html":
				html = true
			}
		}
	}
	return html
}
