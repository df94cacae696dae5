package window

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpen(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	// 2026-12-07 is a Monday.
	at := func(day, hh, mm int, loc *time.Location) time.Time {
		return time.Date(2026, 12, day, hh, mm, 0, 0, loc)
	}
	for _, tc := range []struct {
		name  string
		spec  string
		now   time.Time
		open  bool
		opens time.Time
	}{
		{name: "none: always", spec: "", now: at(7, 3, 0, time.UTC), open: true},
		{name: "inside", spec: "Mon-Fri 09:00-17:00 Europe/Berlin", now: at(7, 10, 0, berlin), open: true},
		{name: "before, same day", spec: "Mon-Fri 09:00-17:00 Europe/Berlin", now: at(7, 8, 59, berlin), opens: at(7, 9, 0, berlin)},
		{name: "the zone counts: 08:30 UTC is 09:30 in Berlin", spec: "Mon-Fri 09:00-17:00 Europe/Berlin", now: at(7, 8, 30, time.UTC), open: true},
		{name: "at the close: closed", spec: "Mon-Fri 09:00-17:00 Europe/Berlin", now: at(7, 17, 0, berlin), opens: at(8, 9, 0, berlin)},
		{name: "friday evening waits for monday", spec: "Mon-Fri 09:00-17:00 Europe/Berlin", now: at(11, 18, 0, berlin), opens: at(14, 9, 0, berlin)},
		{name: "past midnight: saturday 01:00 is in friday's window", spec: "Fri 22:00-02:00 UTC", now: at(12, 1, 0, time.UTC), open: true},
		{name: "past midnight: saturday 02:00 is past it", spec: "Fri 22:00-02:00 UTC", now: at(12, 2, 0, time.UTC), opens: at(18, 22, 0, time.UTC)},
		{name: "the nearest of several", spec: "Sat 10:00-11:00 UTC; Tue 04:00-05:00 UTC", now: at(7, 12, 0, time.UTC), opens: at(8, 4, 0, time.UTC)},
		{name: "a list of days, to the end of the day", spec: "Mon,Wed 23:00-24:00 UTC", now: at(9, 23, 30, time.UTC), open: true},
		{name: "a range over the week's end", spec: "Sat-Mon 00:00-24:00 UTC", now: at(7, 12, 0, time.UTC), open: true},
		{name: "daylight saving: the wall clock", spec: "Sun 03:30-04:30 Europe/Berlin", now: time.Date(2027, 3, 27, 12, 0, 0, 0, time.UTC), opens: time.Date(2027, 3, 28, 3, 30, 0, 0, berlin)},
		{name: "daylight saving: a window inside the hour skipped moves with the clock", spec: "Sun 02:15-02:45 Europe/Berlin", now: time.Date(2027, 3, 27, 12, 0, 0, 0, time.UTC), opens: time.Date(2027, 3, 28, 3, 15, 0, 0, berlin)},
		{name: "daylight saving: a window that is all skipped is none that day", spec: "Sun 02:30-03:30 Europe/Berlin", now: time.Date(2027, 3, 27, 12, 0, 0, 0, time.UTC), opens: time.Date(2027, 4, 4, 2, 30, 0, 0, berlin)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Parse(tc.spec)
			require.NoError(t, err)
			open, opens := w.Open(tc.now)
			assert.Equal(t, tc.open, open)
			if !tc.open {
				assert.True(t, tc.opens.Equal(opens), "opens %s, want %s", opens, tc.opens)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for spec, want := range map[string]string{
		"Mon-Fri 09:00-17:00":               "2 fields, not 3",
		"Monday 09:00-17:00 UTC":            `"Monday" is not a day`,
		"Mon 9:00-17:00 UTC":                `"9:00" is not HH:MM`,
		"Mon 09:00-25:00 UTC":               `"25:00" is not a time of day`,
		"Mon 24:00-02:00 UTC":               `"24:00" is not a time of day`,
		"Mon 09:00-09:00 UTC":               "opens and closes at once",
		"Mon 09:00-17:00 Mars/Olympus":      "not an IANA time zone",
		"Mon 09:00-17:00 Local":             "not an IANA time zone",
		"Mon 09:00-17:00 UTC; Tue 1:00 UTC": `window "Tue 1:00 UTC"`,
	} {
		_, err := Parse(spec)
		require.Error(t, err, spec)
		assert.Contains(t, err.Error(), want, spec)
		assert.Contains(t, err.Error(), "write DAYS HH:MM-HH:MM ZONE", spec)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"Mon-Fri 09:00-17:00 Europe/Berlin", "Fri 22:00-02:00 UTC; Sat 10:00-11:00 UTC", "", "Sun-Sat 00:00-24:00 UTC"} {
		f.Add(s, int64(1796000000))
	}
	f.Add("Sun 02:30-03:30 Europe/Berlin", int64(1806062400)) // the night the clocks go forward
	f.Add("Sun 02:15-02:45 Australia/Lord_Howe", int64(1791000000))
	f.Fuzz(func(t *testing.T, s string, unix int64) {
		w, err := Parse(s)
		if err != nil {
			return
		}
		now := time.Unix(unix%(1<<34), 0)
		open, opens := w.Open(now)
		if !open {
			// A window that parses opens within two weeks (one, but for daylight saving), and is
			// open when it opens.
			assert.True(t, opens.After(now), "%q at %s: opens %s", s, now, opens)
			assert.True(t, opens.Sub(now) <= 15*24*time.Hour, "%q at %s: opens %s", s, now, opens)
			again, _ := w.Open(opens)
			assert.True(t, again, "%q: open at its opening %s", s, opens)
		}
	})
}

func TestPick(t *testing.T) {
	flag, err := Parse("Mon-Sun 01:00-02:00 UTC")
	require.NoError(t, err)
	for _, tc := range []struct {
		name           string
		namespace, own string
		want           string
		problems       []string
	}{
		{"none: the flag's", "", "", "Mon-Sun 01:00-02:00 UTC", nil},
		{"the namespace's over the flag's", "Sat-Sun 10:00-12:00 UTC", "", "Sat-Sun 10:00-12:00 UTC", nil},
		{"the workload's over the namespace's", "Sat-Sun 10:00-12:00 UTC", "Mon-Fri 09:00-17:00 Europe/Berlin", "Mon-Fri 09:00-17:00 Europe/Berlin", nil},
		{"the workload's does not parse: the namespace's, and said", "Sat-Sun 10:00-12:00 UTC", "weekdays", "Sat-Sun 10:00-12:00 UTC",
			[]string{`configwave.io/rollout-window: window "weekdays"`}},
		{"the namespace's does not parse: the flag's, and said naming the namespace", "sometimes", "", "Mon-Sun 01:00-02:00 UTC",
			[]string{`namespace shop's configwave.io/rollout-window: window "sometimes"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := Pick(flag, "shop", tc.namespace, tc.own)
			assert.Equal(t, tc.want, got.String())
			require.Len(t, problems, len(tc.problems))
			for i, p := range tc.problems {
				assert.Contains(t, problems[i], p)
			}
		})
	}
}
