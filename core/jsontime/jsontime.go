// Package jsontime is the one time format palmgate answers in: RFC 3339, UTC, with
// milliseconds (2026-11-21T20:00:00.000Z).
package jsontime

import "time"

// Layout is the layout of every time palmgate answers.
const Layout = "2006-01-02T15:04:05.000Z"

// Time is a time that marshals as RFC 3339 UTC with milliseconds.
type Time time.Time

// Format returns t in Layout.
func (t Time) Format() string { return time.Time(t).UTC().Format(Layout) }

// MarshalJSON writes t in Layout.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.Format() + `"`), nil
}

// UnmarshalJSON reads an RFC 3339 time.
func (t *Time) UnmarshalJSON(b []byte) error {
	var tt time.Time
	if err := tt.UnmarshalJSON(b); err != nil {
		return err
	}
	*t = Time(tt)
	return nil
}

// IsZero reports whether t is the zero time (for omitzero).
func (t Time) IsZero() bool { return time.Time(t).IsZero() }
