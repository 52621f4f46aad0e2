package edge

import "net/http"

// renderPalmAppPage is what a scan URL shows in a browser: on a phone without the
// palm app, "Open in your palm app" opens the scan URL in the browser instead of
// the app. The page says what the app is and where to get it (the operator's
// palm_app_url, or a neutral text without it); it shows nothing of the challenge.
// The app itself asks for JSON (or sends no Accept) and gets the challenge.
func (s *Server) renderPalmAppPage(w http.ResponseWriter, r *http.Request) {
	d := errorPageData{
		Title: "Open this in your palm app",
		What:  "This link is meant for the palm app, which checks your palm to confirm that it is you. It opened in the browser because the palm app is not installed on this device, or did not take the link.",
	}
	if s.appURL != "" {
		d.ActionURL, d.ActionText = s.appURL, "Get the palm app"
		d.Todo = []string{
			"Install the palm app, then go back to the sign-in page and tap “Open in your palm app” again.",
			"Or sign in on a computer and scan its code with the palm app on this phone.",
		}
	} else {
		d.Todo = []string{
			"Ask the service that sent you here which palm app to use and install it, then go back to the sign-in page and tap “Open in your palm app” again.",
			"Or sign in on a computer and scan its code with the palm app on this phone.",
		}
	}
	s.renderErrorPage(w, r, http.StatusOK, d)
}
