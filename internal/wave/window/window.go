// Package window reads maintenance windows, when a config rollout may start
// (configwave.io/rollout-window on a workload, --rollout-window for all), in the form people
// already write them: "Mon-Fri 09:00-17:00 Europe/Berlin", several joined by ";", a window
// past midnight ("Fri 22:00-02:00 UTC", Friday's night into Saturday) too. Open is the pure
// rule: whether a rollout may start now, else when it may.
package window

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Annotation on a workload: its windows, in place of --rollout-window.
const Annotation = "configwave.io/rollout-window"

// NowAnnotation on a workload, "true": roll the change that waits for a window now (a revoked
// credential); wave removes it once it rolled.
const NowAnnotation = "configwave.io/rollout-now"

// Windows are one or more windows; none means always open.
type Windows struct {
	list []window
	text string
}

type window struct {
	days       [7]bool // by time.Weekday: the day a window starts on
	start, end int     // minutes from midnight; end <= start runs past midnight
	loc        *time.Location
}

// String is the windows as written.
func (w Windows) String() string { return w.text }

// Always reports whether w never closes.
func (w Windows) Always() bool { return len(w.list) == 0 }

var dayNames = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// Parse reads s; "" is always open. An error names what is wrong, for an InvalidAnnotation
// Event or a flag's refusal.
func Parse(s string) (Windows, error) {
	w := Windows{text: strings.TrimSpace(s)}
	if w.text == "" {
		return w, nil
	}
	for _, part := range strings.Split(w.text, ";") {
		one, err := parseOne(strings.TrimSpace(part))
		if err != nil {
			return Windows{}, fmt.Errorf("window %q: %w (write DAYS HH:MM-HH:MM ZONE, such as \"Mon-Fri 09:00-17:00 Europe/Berlin\")", strings.TrimSpace(part), err)
		}
		w.list = append(w.list, one)
	}
	return w, nil
}

func parseOne(s string) (window, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return window{}, fmt.Errorf("%d fields, not 3", len(f))
	}
	var w window
	for _, d := range strings.Split(f[0], ",") {
		from, to, isRange := strings.Cut(d, "-")
		a, ok := dayNames[strings.ToLower(from)]
		if !ok {
			return window{}, fmt.Errorf("%q is not a day (Mon, Tue, ..., Sun)", from)
		}
		b := a
		if isRange {
			if b, ok = dayNames[strings.ToLower(to)]; !ok {
				return window{}, fmt.Errorf("%q is not a day (Mon, Tue, ..., Sun)", to)
			}
		}
		for day := a; ; day = (day + 1) % 7 {
			w.days[day] = true
			if day == b {
				break
			}
		}
	}
	from, to, ok := strings.Cut(f[1], "-")
	if !ok {
		return window{}, fmt.Errorf("%q is not HH:MM-HH:MM", f[1])
	}
	var err error
	if w.start, err = minutes(from, false); err != nil {
		return window{}, err
	}
	if w.end, err = minutes(to, true); err != nil {
		return window{}, err
	}
	if w.start == w.end {
		return window{}, fmt.Errorf("%q opens and closes at once", f[1])
	}
	if w.loc, err = time.LoadLocation(f[2]); err != nil || f[2] == "Local" {
		return window{}, fmt.Errorf("%q is not an IANA time zone (UTC, Europe/Berlin, America/New_York)", f[2])
	}
	return w, nil
}

// minutes reads HH:MM; 24:00 only as an end.
func minutes(s string, end bool) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	switch {
	case !ok || len(h) != 2 || len(m) != 2 || err1 != nil || err2 != nil || mm < 0 || mm > 59 || hh < 0:
		return 0, fmt.Errorf("%q is not HH:MM", s)
	case hh == 24 && mm == 0 && end:
		return 24 * 60, nil
	case hh > 23:
		return 0, fmt.Errorf("%q is not a time of day", s)
	}
	return hh*60 + mm, nil
}

// Open says whether a rollout may start at now; if not, when the next window opens.
func (w Windows) Open(now time.Time) (open bool, opens time.Time) {
	if w.Always() {
		return true, now
	}
	for _, one := range w.list {
		local := now.In(one.loc)
		// A window that started yesterday may still run; the next one is within a week, or two
		// when daylight saving leaves none on this week's day.
		for offset := -1; offset <= 14; offset++ {
			day := time.Date(local.Year(), local.Month(), local.Day()+offset, 0, 0, 0, 0, one.loc)
			if !one.days[day.Weekday()] {
				continue
			}
			start := time.Date(day.Year(), day.Month(), day.Day(), one.start/60, one.start%60, 0, 0, one.loc)
			endDay := day.Day()
			if one.end <= one.start {
				endDay++
			}
			end := time.Date(day.Year(), day.Month(), endDay, one.end/60, one.end%60, 0, 0, one.loc)
			if !end.After(start) {
				continue // the whole window falls in a gap of daylight saving: none that day
			}
			switch {
			case !now.Before(start) && now.Before(end):
				return true, now
			case start.After(now) && (opens.IsZero() || start.Before(opens)):
				opens = start
			}
		}
	}
	return false, opens
}

// Pick is the windows a workload rolls in: its own annotation's (workload), else its
// namespace's (namespace, the same annotation on the Namespace), else the flag's. One that does
// not parse is passed over with a problem naming the object and the field, and the next applies.
func Pick(flag Windows, namespaceName, namespace, workload string) (Windows, []string) {
	var problems []string
	if strings.TrimSpace(workload) != "" {
		own, err := Parse(workload)
		if err == nil {
			return own, nil
		}
		problems = append(problems, Annotation+": "+err.Error()+"; the namespace's window, else --rollout-window, applies meanwhile")
	}
	if strings.TrimSpace(namespace) != "" {
		ns, err := Parse(namespace)
		if err == nil {
			return ns, problems
		}
		problems = append(problems, "namespace "+namespaceName+"'s "+Annotation+": "+err.Error()+"; --rollout-window applies meanwhile")
	}
	return flag, problems
}
