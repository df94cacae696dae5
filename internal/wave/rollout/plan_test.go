package rollout

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/approval"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/pacing"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/window"
	"github.com/configwave/configwave/internal/wave/workload"
)

// plan's every branch, from situations written by hand: no cache, no API server. The three
// facts that cost API reads fail the test when a branch that must not need them calls them.
func TestPlan(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	const key = "k1"
	inputs := func(digests ...string) confighash.Inputs { // "configmap/a=1", ...
		in := confighash.Inputs{Objects: map[string]string{}}
		for i, d := range digests {
			name, digest, _ := strings.Cut(d, "=")
			in.Objects[name] = digest
			if i > 0 {
				in.Value += ","
			}
			in.Value += d
		}
		return in
	}
	keyed := func(v string) string { return confighash.WithKeyID(key, v) }
	never := func(t *testing.T) situation {
		fail := func(what string) { t.Helper(); t.Errorf("%s read, on a path that needs no API read", what) }
		return situation{
			WaveHash:        func() (string, error) { fail("Wave's hash"); return "", nil },
			EarlierWaveHash: func() (bool, error) { fail("earlier Wave releases' hashes"); return false, nil },
			OwnHash:         func() (string, error) { fail("wave's own hash"); return "", nil },
			StakaterBehind:  func() (bool, string, error) { fail("Reloader's marks"); return false, "", nil },
			Unkeyed:         func() (confighash.Inputs, error) { fail("the unkeyed record"); return confighash.Inputs{}, nil },
			ByMetadata: func() (confighash.Inputs, error) {
				fail("the record made without a key")
				return confighash.Inputs{}, nil
			},
		}
	}
	// wave: a workload opted in with Wave's annotation whose pods ran configmap/a=1.
	wave := func(t *testing.T, now confighash.Inputs) situation {
		s := never(t)
		s.Now, s.OptedIn, s.Wave, s.KeyID = t0, true, true, key
		s.Record, s.HasRecord = keyed("configmap/a=1"), true
		s.Inputs = now
		s.Entries = map[string]entry{}
		for name := range now.Objects {
			s.Entries[name] = entry{Follows: true}
		}
		return s
	}
	hash := func(h string) func() (string, error) { return func() (string, error) { return h, nil } }
	// csi: a Reloader workload that follows SecretProviderClass vault (a transient entry), whose
	// pods ran entry ran and now run entry now, with --reload-on-create and --reload-on-delete.
	csi := func(t *testing.T, ran, now string) situation {
		s := wave(t, inputs("configmap/a=1", now))
		s.Record = keyed("configmap/a=1," + ran)
		s.Wave, s.Stakater, s.RollOnCreate, s.RollOnDelete = false, true, true, true
		s.Entries["secretproviderclass/vault"] = entry{Follows: true, Transient: true}
		return s
	}
	// manual: a Wave workload with configwave.io/approval: "manual" whose pods ran configmap/a=1.
	manual := func(t *testing.T, now ...string) situation {
		s := wave(t, inputs(now...))
		s.Approval = approval.Gate{Manual: true}
		return s
	}
	// windowed: a Wave workload whose window is Saturday 10:00-11:00 UTC, looked at on a Wednesday.
	windowed := func(t *testing.T, now ...string) situation {
		s := wave(t, inputs(now...))
		w, err := window.Parse("Sat 10:00-11:00 UTC")
		require.NoError(t, err)
		s.Window = w
		return s
	}
	// incomplete: a Wave workload whose Secret tls changed and is a half-written TLS pair, with
	// the rollout record rec and --source-ready-timeout 10m.
	incomplete := func(t *testing.T, rec rolloutrecord.Record) situation {
		s := wave(t, inputs("configmap/a=1", "secret/tls=2"))
		s.Record = keyed("configmap/a=1,secret/tls=1")
		s.Incomplete = map[string]string{"secret/tls": "tls.crt and tls.key are not a pair (private key does not match public key)"}
		s.SourceReadyTimeout, s.Rec = 10*time.Minute, rec
		return s
	}
	// rolledSaying: a rollout of change whose Events are ConfigChanged and the others named.
	rolledSaying := func(t *testing.T, d decision, change string, also ...string) {
		t.Helper()
		assert.Equal(t, ResultRolled, d.Result)
		assert.Equal(t, "rollout", d.Write)
		assert.Equal(t, change, d.Record.Change)
		var said []string
		for _, e := range d.Events {
			said = append(said, e.Reason)
		}
		assert.Equal(t, append([]string{"ConfigChanged"}, also...), said)
	}
	missing := &podrefs.MissingError{Ref: configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: "a"}, Where: "container app envFrom"}
	wantRecordOnly := func(t *testing.T, d decision, result string) {
		t.Helper()
		assert.Equal(t, result, d.Result)
		assert.Equal(t, "baseline", d.Write)
		assert.Empty(t, d.InputsHash, "a record-only write leaves the template")
		assert.Empty(t, d.Events)
	}
	wantRollout := func(t *testing.T, d decision, change string) {
		t.Helper()
		assert.Equal(t, ResultRolled, d.Result)
		assert.Equal(t, "rollout", d.Write)
		assert.NotEmpty(t, d.InputsHash)
		assert.Equal(t, change, d.Record.Change)
		assert.Equal(t, t0, d.Record.Started)
		require.Len(t, d.Events, 1)
		assert.Equal(t, "ConfigChanged", d.Events[0].Reason)
		assert.Contains(t, d.Events[0].Message, change+" changed; rolling out")
	}

	tests := []struct {
		name  string
		s     func(t *testing.T) situation
		check func(t *testing.T, d decision, err error)
	}{
		{"not opted in: ignored, nothing written", func(t *testing.T) situation { return never(t) }, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, decision{Result: ResultIgnored}, d)
		}},
		{"missing config, first sight: the record with the object absent, one warning", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=absent"))
			s.Inputs.Missing = []*podrefs.MissingError{missing}
			s.Record, s.HasRecord = "", false
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultMissing, d.Result)
			assert.Equal(t, "baseline", d.Write)
			assert.Equal(t, keyed("configmap/a=absent"), *d.Inputs)
			assert.Equal(t, "configmap/a", d.Record.Missing)
			assert.Equal(t, t0, d.Record.MissingSince)
			require.Len(t, d.Events, 1)
			assert.Equal(t, "ConfigMissing", d.Events[0].Reason)
			assert.Contains(t, d.Events[0].Message, "the workload rolls once it exists")
		}},
		{"missing config, recorded: the rollout record says so, once", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=absent"))
			s.Inputs.Missing = []*podrefs.MissingError{missing}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, "missing", d.Write)
			assert.Nil(t, d.Inputs, "the inputs record keeps what the pods run")
			assert.Len(t, d.Events, 1)
		}},
		{"missing config, already on record: nothing, and no warning again", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=absent"))
			s.Inputs.Missing = []*podrefs.MissingError{missing}
			s.Rec = rolloutrecord.Record{Missing: "configmap/a", MissingSince: t0.Add(-time.Hour)}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, decision{Result: ResultMissing, Record: rolloutrecord.Record{Missing: "configmap/a", MissingSince: t0.Add(-time.Hour)}}, d)
		}},
		{"scheduling Wave disabled: restored, the Event after the write", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.SchedulingDisabled, s.Scheduler, s.SchedulerNow = true, "custom", "waveSchedulingDisabled"
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, "scheduler", d.Write)
			assert.Equal(t, "custom", d.Scheduler)
			require.Len(t, d.Events, 1)
			assert.Equal(t, "SchedulingRestored", d.Events[0].Reason)
			assert.NotContains(t, d.Events[0].Message, "dry run")
		}},
		{"record equal to the inputs: nothing at all", func(t *testing.T) situation { return wave(t, inputs("configmap/a=1")) }, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, decision{Result: ResultUnchanged}, d)
		}},
		{"back as it was after missing: the note goes, nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=1"))
			s.Rec = rolloutrecord.Record{Change: "configmap/a", Started: t0.Add(-time.Hour), Missing: "configmap/a", MissingSince: t0.Add(-time.Minute)}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultUnchanged, d.Result)
			assert.Equal(t, "missing", d.Write)
			assert.Equal(t, rolloutrecord.Record{Change: "configmap/a", Started: t0.Add(-time.Hour)}, d.Record)
		}},
		{"first sight, no Wave hash: recorded, nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Record, s.HasRecord = "", false
			s.WaveHash = hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
			assert.Equal(t, keyed("configmap/a=2"), *d.Inputs)
		}},
		{"first sight, Wave's hash of the current data (adopted from Wave): recorded, nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Record, s.HasRecord, s.CurrentHash = "", false, "h2"
			s.WaveHash = hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"first sight, Wave's hash is behind: roll once", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Record, s.HasRecord, s.CurrentHash = "", false, "h1"
			s.WaveHash = hash("h2")
			s.EarlierWaveHash = func() (bool, error) { return false, nil }
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "config-hash annotation differs from the current config")
			assert.Equal(t, "h2", d.Hash)
			assert.True(t, d.Follow)
			assert.True(t, d.Restart)
		}},
		{"first sight without a Wave hash, with an install key: the record says the hash is keyed; nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Record, s.HasRecord, s.CanOwnHash = "", false, true
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
			assert.Equal(t, "key="+key+",hash=keyed,configmap/a=2", *d.Inputs)
		}},
		{"first sight with a Wave hash, with an install key: Wave's own hash stays", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Record, s.HasRecord, s.CanOwnHash, s.CurrentHash = "", false, true, "h2"
			s.WaveHash = hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
			assert.Equal(t, keyed("configmap/a=2"), *d.Inputs)
		}},
		{"keyed hash on record, changed: the new hash is keyed too", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Record, s.CanOwnHash = confighash.RecordValue(key, true, "configmap/a=1"), true
			s.OwnHash = hash("keyed-h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "configmap/a")
			assert.Equal(t, "keyed-h2", d.Hash)
			assert.Equal(t, "key="+key+",hash=keyed,configmap/a=2", *d.Inputs)
		}},
		{"keyed hash on record, nothing changed: nothing at all", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=1"))
			s.Record, s.CanOwnHash = confighash.RecordValue(key, true, "configmap/a=1"), true
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, decision{Result: ResultUnchanged}, d)
		}},
		{"first sight, another Wave release's hash of the current data (0.6's strings): recorded, nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Record, s.HasRecord, s.CurrentHash = "", false, "h2-as-wave-0.6"
			s.WaveHash = hash("h2")
			s.EarlierWaveHash = func() (bool, error) { return true, nil }
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"Wave's view misses an object: its hash stays as it is", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.CurrentHash = "h1"
			s.WaveHash = func() (string, error) { return "", missing }
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "configmap/a")
			assert.Equal(t, "h1", d.Hash)
		}},
		{"Wave's hash cannot be computed: an error, nothing written", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.WaveHash = func() (string, error) { return "", errors.New("forbidden") }
			return s
		}, func(t *testing.T, d decision, err error) {
			assert.ErrorContains(t, err, "compute the config hash: forbidden")
		}},
		{"a record under a key wave no longer has: judged by the marks, which are current", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Record, s.CurrentHash = confighash.WithKeyID("deadbeef", "configmap/a=9"), "h2"
			s.WaveHash = hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"a record written before records named their key: named, nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Record = "configmap/a=2"
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"an unkeyed record of the current config: keyed, nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Record = "configmap/a=u2"
			s.Unkeyed = func() (confighash.Inputs, error) { return inputs("configmap/a=u2"), nil }
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
			assert.Equal(t, keyed("configmap/a=2"), *d.Inputs)
		}},
		{"an unkeyed record of older config: roll once", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Record = "configmap/a=u1"
			s.Unkeyed = func() (confighash.Inputs, error) { return inputs("configmap/a=u2"), nil }
			s.WaveHash = hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "configmap/a")
		}},
		{"no key (Secrets by metadata), first sight without a Wave hash: the record says the hash is made from it; nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2", "secret/s=m1"))
			s.KeyID, s.Record, s.HasRecord, s.CanOwnHash = confighash.MetaID, "", false, true
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
			assert.Equal(t, "secrets=meta,hash=inputs,configmap/a=2,secret/s=m1", *d.Inputs)
		}},
		{"no key, the Secret written (a new resourceVersion): roll, with the hash of the inputs, never Wave's formula", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=1", "secret/s=m2"))
			s.KeyID, s.CanOwnHash = confighash.MetaID, true
			s.Record = confighash.RecordValue(confighash.MetaID, true, "configmap/a=1,secret/s=m1")
			s.OwnHash = hash(confighash.HashOfInputs("configmap/a=1,secret/s=m2"))
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "secret/s")
			assert.Equal(t, confighash.HashOfInputs("configmap/a=1,secret/s=m2"), d.Hash)
			assert.Equal(t, "secrets=meta,hash=inputs,configmap/a=1,secret/s=m2", *d.Inputs)
		}},
		{"no key, a record under a key wave no longer reads (a ConfigMap's or a Lease's), marks current: nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.KeyID, s.CanOwnHash = confighash.MetaID, true
			s.Record, s.CurrentHash = confighash.WithKeyID("deadbeef", "configmap/a=9"), "h2"
			s.WaveHash = hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
			assert.Equal(t, "secrets=meta,configmap/a=2", *d.Inputs, "Wave's hash stays Wave's")
		}},
		{"no key, a record with a hash keyed under a key wave no longer reads: nothing proves the pods current: roll once, to wave's own hash", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.KeyID, s.CanOwnHash = confighash.MetaID, true
			s.Record, s.CurrentHash = confighash.RecordValue("deadbeef", true, "configmap/a=9"), "hmac-under-the-old-key"
			s.OwnHash = hash("of-inputs")
			s.EarlierWaveHash = func() (bool, error) { return false, nil }
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "config-hash annotation differs from the current config")
			assert.Equal(t, "of-inputs", d.Hash)
			assert.Equal(t, "secrets=meta,hash=inputs,configmap/a=2", *d.Inputs)
		}},
		{"a key now, a record made without one of the current config (the Secret created later): keyed, nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2", "secret/s=k2"))
			s.CanOwnHash = true
			s.Record = confighash.RecordValue(confighash.MetaID, true, "configmap/a=2,secret/s=m2")
			s.ByMetadata = func() (confighash.Inputs, error) { return inputs("configmap/a=2", "secret/s=m2"), nil }
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
			assert.Equal(t, "key="+key+",hash=keyed,configmap/a=2,secret/s=k2", *d.Inputs, "wave's own hash stays wave's own")
		}},
		{"a key now, a record made without one, the Secret written since: roll once", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2", "secret/s=k3"))
			s.Record = confighash.RecordValue(confighash.MetaID, false, "configmap/a=2,secret/s=m2")
			s.ByMetadata = func() (confighash.Inputs, error) { return inputs("configmap/a=2", "secret/s=m3"), nil }
			s.WaveHash = hash("h3")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "secret/s")
			assert.Equal(t, "h3", d.Hash)
		}},
		{"an unkeyed record that cannot be compared: an error", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Record = "configmap/a=u1"
			s.Unkeyed = func() (confighash.Inputs, error) { return confighash.Inputs{}, errors.New("timeout") }
			return s
		}, func(t *testing.T, d decision, err error) {
			assert.ErrorContains(t, err, "read the config to adopt its inputs record: timeout")
		}},
		{"changed: roll, with Wave's hash and ours in the template", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.WaveHash = hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "configmap/a")
			assert.Equal(t, "h2", d.Hash)
			assert.Equal(t, keyed("configmap/a=2"), *d.Inputs)
			assert.Equal(t, inputsHash(keyed("configmap/a=2")), d.InputsHash)
			assert.Equal(t, t0, d.Wanted)
		}},
		{"changed while the last rollout still rolls: the record names both changes", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.WaveHash = hash("h2")
			s.Rec = rolloutrecord.Record{Change: "secret/b", Started: t0.Add(-time.Second)}
			s.Progress = workload.Progress{Observed: true}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, "secret/b; configmap/a", d.Record.Change)
		}},
		{"changed, but not followed (Reloader's list names another): recorded, nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Wave, s.Stakater = false, true
			s.Entries["configmap/a"] = entry{}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"just ignored: it leaves the record, nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs())
			s.Entries["configmap/a"] = entry{Ignored: true}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
			assert.Equal(t, keyed(""), *d.Inputs)
		}},
		{"a reference taken out of the template rolls a Wave workload", func(t *testing.T) situation {
			s := wave(t, inputs())
			s.WaveHash = hash("h0")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "configmap/a")
		}},
		{"... and not a Reloader one", func(t *testing.T) situation {
			s := wave(t, inputs())
			s.Wave, s.Stakater = false, true
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"Reloader: an object created later rolls nothing without --reload-on-create", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=1", "configmap/b=2"))
			s.Wave, s.Stakater = false, true
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"... and rolls with it", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=1", "configmap/b=2"))
			s.Wave, s.Stakater, s.RollOnCreate = false, true, true
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "configmap/b")
			assert.Empty(t, d.Hash, "no Wave hash on a workload that speaks only Reloader's dialect")
		}},
		{"Reloader: an object deleted rolls nothing without --reload-on-delete", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=absent"))
			s.Wave, s.Stakater = false, true
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"CSI: a SecretProviderClass whose versions changed rolls", func(t *testing.T) situation {
			return csi(t, "secretproviderclass/vault=1", "secretproviderclass/vault=2")
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "secretproviderclass/vault")
		}},
		{"CSI: its first pod's status comes: nothing rolls, even with --reload-on-create", func(t *testing.T) situation {
			return csi(t, "secretproviderclass/vault=absent", "secretproviderclass/vault=2")
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"CSI: its last pod's status goes: nothing rolls, even with --reload-on-delete", func(t *testing.T) situation {
			return csi(t, "secretproviderclass/vault=2", "secretproviderclass/vault=absent")
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"CSI: a workload in both dialects that starts following a class: nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=1", "secretproviderclass/vault=2"))
			s.Stakater = true
			s.Entries["secretproviderclass/vault"] = entry{Follows: true, Transient: true}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"a newly named object that does not exist: nothing the pods see changed", func(t *testing.T) situation {
			return wave(t, inputs("configmap/a=1", "configmap/b=absent"))
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"the record is behind, and the template's Wave hash is the current config's (Wave rolled it while wave was stopped): recorded, nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.CurrentHash = "h2"
			s.WaveHash, s.OwnHash = hash("h2"), hash("k2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
			assert.Equal(t, keyed("configmap/a=2"), *d.Inputs, "the current inputs adopted into the record")
		}},
		{"the record is behind, and the template's Wave hash is an older config's: roll", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.CurrentHash = "h1"
			s.WaveHash, s.OwnHash = hash("h2"), hash("k2")
			s.EarlierWaveHash = func() (bool, error) { return false, nil }
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "configmap/a")
		}},
		{"the record is behind, and Reloader's marks are the current data's (Reloader rolled it): recorded, nothing rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Wave, s.Stakater = false, true
			s.StakaterCurrent = func(names []string) (bool, error) {
				assert.Equal(t, []string{"configmap/a"}, names)
				return true, nil
			}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"the record is behind, and Reloader left no current mark: roll", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Wave, s.Stakater = false, true
			s.StakaterCurrent = func([]string) (bool, error) { return false, nil }
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "configmap/a")
		}},
		{"first sight from Reloader: its mark is older: roll once, saying so", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Wave, s.Stakater, s.Record, s.HasRecord = false, true, "", false
			s.StakaterBehind = func() (bool, string, error) { return true, "configmap/a (Reloader's mark is older)", nil }
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "configmap/a (Reloader's mark is older)")
		}},
		{"first sight from Reloader: its marks are current: recorded", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Wave, s.Stakater, s.Record, s.HasRecord = false, true, "", false
			s.StakaterBehind = func() (bool, string, error) { return false, "", nil }
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRecordOnly(t, d, ResultBaseline)
		}},
		{"first sight from Reloader: the marks cannot be compared: an error", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Wave, s.Stakater, s.Record, s.HasRecord = false, true, "", false
			s.StakaterBehind = func() (bool, string, error) { return false, "", errors.New("timeout") }
			return s
		}, func(t *testing.T, d decision, err error) {
			assert.ErrorContains(t, err, "compare Reloader's marks: timeout")
		}},
		{"held for --coalesce: nothing written, looked at again", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.WaveHash = hash("h2")
			s.Pace = pacing.Hold{Coalesce: time.Second, FirstWanted: t0.Add(-300 * time.Millisecond)}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultHeld, d.Result)
			assert.Empty(t, d.Write)
			assert.Empty(t, d.Events)
			assert.Equal(t, 700*time.Millisecond, d.HoldFor)
			assert.Equal(t, t0.Add(-300*time.Millisecond), d.Wanted)
		}},
		{"held by the floor since the last rollout", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.WaveHash = hash("h2")
			s.Rec = rolloutrecord.Record{Change: "configmap/a", Started: t0.Add(-10 * time.Second)}
			s.Pace = pacing.Hold{Floor: time.Minute, FloorSource: pacing.MinRolloutIntervalAnnotation}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultHeld, d.Result)
			assert.Equal(t, 50*time.Second, d.HoldFor)
			assert.Equal(t, t0, d.Wanted, "first wanted now")
		}},
		{"dry run: the Event says what it would do; no Job, nothing followed", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.WaveHash, s.DryRun = hash("h2"), true
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Contains(t, d.Events[0].Message, "dry run: would roll: ")
			assert.False(t, d.Restart)
			assert.False(t, d.Follow, "no rollout was written: there is nothing to follow, report or count")
			assert.Equal(t, "config changed; would roll out (dry run)", d.Log.Msg)
		}},
		{"a CronJob that may not start a Job now: recorded, and the Event says why", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.WaveHash, s.Progress.Untracked = hash("h2"), true
			s.RestartBlocked = "the CronJob is suspended"
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, "rollout", d.Write, "the template carries the change: the next run uses it")
			assert.False(t, d.Restart)
			require.Len(t, d.Events, 2)
			assert.Equal(t, event{corev1.EventTypeNormal, "JobNotStarted", "no Job started for the configmap/a change: the CronJob is suspended"}, d.Events[1])
		}},
		{"the Job's ID: the same decision again gives the same one, whatever else changed on the CronJob", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.WaveHash, s.Progress.Untracked = hash("h2"), true
			s.Rec = rolloutrecord.Record{Change: "configmap/a", Started: t0.Add(-time.Hour)}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			s := wave(t, inputs("configmap/a=2"))
			s.WaveHash, s.Progress.Untracked = hash("h2"), true
			s.Rec = rolloutrecord.Record{Change: "configmap/a", Started: t0.Add(-time.Hour)}
			s.Now = t0.Add(time.Minute) // tried again later (a conflict, a restart of wave)
			again, _ := plan(s)
			assert.Equal(t, d.RestartID, again.RestartID)
			s.Rec.Started = t0.Add(-time.Minute) // a rollout landed since: the same config back later is another change
			later, _ := plan(s)
			assert.NotEqual(t, d.RestartID, later.RestartID)
			s.Rec.Started, s.Inputs = t0.Add(-time.Hour), inputs("configmap/a=3")
			other, _ := plan(s)
			assert.NotEqual(t, d.RestartID, other.RestartID)
		}},
		{"an Argo Rollout with Reloader's rollout-strategy restart: spec.restartAt, the template left alone", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.WaveHash, s.RestartInPlace = hash("h2"), true
			s.Now = t0.Add(1500 * time.Millisecond)
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, "rollout", d.Write)
			assert.Equal(t, t0.Add(2*time.Second), d.RestartAt, "RFC 3339 seconds, the next whole second after the change: a pod started at t0+1.2s is restarted too")
			assert.Empty(t, d.Hash, "no template write")
			assert.Empty(t, d.InputsHash, "no template write")
			assert.Equal(t, keyed("configmap/a=2"), *d.Inputs, "the record says what the restarted pods run")
			assert.Contains(t, d.Events[0].Message, "spec.restartAt")
			assert.True(t, d.Follow)
		}},
		{"a workload of a kind with nothing to follow (CronJob): not followed", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.WaveHash = hash("h2")
			s.Progress.Untracked = true
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.False(t, d.Follow)
			assert.True(t, d.Restart)
		}},
		{"warnings: sent when first seen", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=1"))
			s.Warnings = []string{"b", "a"}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, []string{"b", "a"}, d.Warn)
			assert.NotEmpty(t, d.Warned)
		}},
		{"warnings: not sent again while they stay the same", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=1"))
			s.Warnings = []string{"a", "b"}
			s.Warned = situation{Warnings: []string{"b", "a"}}.warn().fingerprint
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Empty(t, d.Warn)
			assert.NotEmpty(t, d.Warned)
		}},
		{"warnings: fixed, forgotten", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=1"))
			s.Warned = situation{Warnings: []string{"a"}}.warn().fingerprint
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Empty(t, d.Warn)
			assert.Empty(t, d.Warned)
		}},
		{"approval manual, a change: it waits, said once, the record keeps it", func(t *testing.T) situation {
			return manual(t, "configmap/a=2")
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			id := manual(t, "configmap/a=2").changeID()
			assert.Equal(t, ResultPendingApproval, d.Result)
			assert.Equal(t, "missing", d.Write, "the rollout record only: the template stays")
			assert.Empty(t, d.InputsHash)
			assert.Equal(t, rolloutrecord.Record{Pending: "configmap/a", PendingID: id, PendingSince: t0}, d.Record)
			assert.Equal(t, t0, d.PendingSince)
			require.Len(t, d.Events, 1)
			assert.Equal(t, "ConfigApprovalPending", d.Events[0].Reason)
			assert.Contains(t, d.Events[0].Message, id)
		}},
		{"approval manual, just restarted with the change pending, a coalesce window open: it waits, nothing written or said again", func(t *testing.T) situation {
			s := manual(t, "configmap/a=2")
			s.Rec = rolloutrecord.Record{Pending: "configmap/a", PendingID: s.changeID(), PendingSince: t0.Add(-time.Hour)}
			s.Pace = pacing.Hold{Coalesce: time.Minute, FirstWanted: t0}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultPendingApproval, d.Result, "a change that waits for a person is not held by pacing")
			assert.Empty(t, d.Write)
			assert.Empty(t, d.Events)
			assert.Equal(t, t0.Add(-time.Hour), d.PendingSince, "the wait counts from the record, across restarts")
		}},
		{"approval manual, a newer change replaces the pending one; the old approval is removed, the wait goes on", func(t *testing.T) situation {
			old := manual(t, "configmap/a=2").changeID()
			s := manual(t, "configmap/a=3")
			s.Approval.Approved = old
			s.Rec = rolloutrecord.Record{Pending: "configmap/a", PendingID: old, PendingSince: t0.Add(-time.Hour)}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultPendingApproval, d.Result)
			assert.Equal(t, manual(t, "configmap/a=3").changeID(), d.Record.PendingID)
			assert.Equal(t, t0.Add(-time.Hour), d.Record.PendingSince, "one wait, however many changes it saw")
			assert.True(t, d.ClearApproval, "an approval of another change is not left to decide a later one")
			require.Len(t, d.Events, 1)
		}},
		{"approval manual, this change approved: it rolls, and the approval is removed with it", func(t *testing.T) situation {
			s := manual(t, "configmap/a=2")
			s.WaveHash = hash("h2")
			s.Approval.Approved = s.changeID()
			s.Rec = rolloutrecord.Record{Pending: "configmap/a", PendingID: s.changeID(), PendingSince: t0.Add(-time.Hour)}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "configmap/a")
			assert.True(t, d.ClearApproval)
			assert.Empty(t, d.Record.PendingID, "the new record has nothing pending")
			assert.True(t, d.PendingSince.IsZero())
		}},
		{"approval manual, approved under a coalesce window: held, the approval kept for the rollout", func(t *testing.T) situation {
			s := manual(t, "configmap/a=2")
			s.Approval.Approved = s.changeID()
			s.Rec = rolloutrecord.Record{Pending: "configmap/a", PendingID: s.changeID(), PendingSince: t0.Add(-time.Hour)}
			s.Pace = pacing.Hold{Coalesce: time.Minute, FirstWanted: t0}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultHeld, d.Result)
			assert.False(t, d.ClearApproval)
			assert.Empty(t, d.Write)
		}},
		{"approval manual, this change rejected: not rolled, said once, the annotation removed", func(t *testing.T) situation {
			s := manual(t, "configmap/a=2")
			s.Approval.Rejected = s.changeID()
			s.Rec = rolloutrecord.Record{Pending: "configmap/a", PendingID: s.changeID(), PendingSince: t0.Add(-time.Hour)}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultRejected, d.Result)
			assert.Equal(t, "missing", d.Write)
			assert.Equal(t, rolloutrecord.Record{Rejected: manual(t, "configmap/a=2").changeID()}, d.Record)
			assert.True(t, d.ClearReject, "recorded: the annotation has done its work")
			require.Len(t, d.Events, 1)
			assert.Equal(t, "ConfigApprovalRejected", d.Events[0].Reason)
			assert.True(t, d.PendingSince.IsZero())
		}},
		{"approval manual, rejected on record: nothing written or said again", func(t *testing.T) situation {
			s := manual(t, "configmap/a=2")
			s.Rec = rolloutrecord.Record{Rejected: s.changeID()}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultRejected, d.Result)
			assert.Empty(t, d.Write)
			assert.Empty(t, d.Events)
		}},
		{"approval manual, the config taken back while approved: nothing waits, the approval removed", func(t *testing.T) situation {
			s := manual(t, "configmap/a=1")
			s.Approval.Approved = manual(t, "configmap/a=2").changeID()
			s.Rec = rolloutrecord.Record{Pending: "configmap/a", PendingID: s.Approval.Approved, PendingSince: t0.Add(-time.Hour)}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultUnchanged, d.Result)
			assert.Equal(t, "missing", d.Write)
			assert.Equal(t, rolloutrecord.Record{}, d.Record)
			assert.True(t, d.ClearApproval)
		}},
		{"approval manual, a rejected change taken back: the rejection forgotten, so that it is asked for when made again", func(t *testing.T) situation {
			s := manual(t, "configmap/a=1")
			s.Rec = rolloutrecord.Record{Rejected: manual(t, "configmap/a=2").changeID()}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultUnchanged, d.Result)
			assert.Equal(t, rolloutrecord.Record{}, d.Record)
		}},
		{"approval manual, an object the workload does not follow changes too: the same change, the same ID", func(t *testing.T) situation {
			s := manual(t, "configmap/a=2", "secret/other=9")
			s.Entries["secret/other"] = entry{}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, manual(t, "configmap/a=2").changeID(), d.Record.PendingID)
		}},
		{"approval manual, digests not keyed: the Event does not carry the ID", func(t *testing.T) situation {
			s := manual(t, "configmap/a=2")
			s.KeyID, s.Record = "", "configmap/a=1"
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultPendingApproval, d.Result)
			require.Len(t, d.Events, 1)
			assert.NotContains(t, d.Events[0].Message, d.Record.PendingID)
			assert.NotEmpty(t, d.Record.PendingID)
		}},
		{"approval manual, revisions turned on: a rollout, so it waits, under its own ID", func(t *testing.T) situation {
			s := manual(t, "configmap/a=1")
			s.Revisions, s.TemplateInputsHash = true, "wave-hash"
			s.Entries["configmap/a"] = entry{Follows: true, InRevisions: true}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultPendingApproval, d.Result)
			assert.Equal(t, revisionsTurnedOn, d.Record.Pending)
			assert.NotEqual(t, approval.ID(keyed("configmap/a=0"), "configmap/a=1\n"), d.Record.PendingID,
				"not the ID the same content had while it waited to roll from another: an approval of that one does not turn revisions on")
		}},
		{"outside the rollout window: deferred until it opens, said once, the record says until when", func(t *testing.T) situation {
			return windowed(t, "configmap/a=2")
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			opens := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC) // t0 is a Wednesday
			assert.Equal(t, ResultDeferred, d.Result)
			assert.Equal(t, "missing", d.Write)
			assert.Empty(t, d.InputsHash, "the template stays")
			assert.Equal(t, opens, d.Record.DeferredUntil)
			assert.Equal(t, opens.Sub(t0)+100*time.Millisecond, d.HoldFor, "looked at again when it opens")
			require.Len(t, d.Events, 1)
			assert.Equal(t, "ConfigRolloutDeferred", d.Events[0].Reason)
			assert.Contains(t, d.Events[0].Message, "at 2026-11-28T10:00:00Z")
		}},
		{"outside the rollout window, just restarted: nothing written or said again", func(t *testing.T) situation {
			s := windowed(t, "configmap/a=2")
			s.Rec = rolloutrecord.Record{DeferredUntil: time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultDeferred, d.Result)
			assert.Empty(t, d.Write)
			assert.Empty(t, d.Events)
			assert.Positive(t, d.HoldFor)
		}},
		{"outside the rollout window, rollout-now: rolls, and the annotation goes with it", func(t *testing.T) situation {
			s := windowed(t, "configmap/a=2")
			s.RolloutNow, s.WaveHash = true, hash("h2")
			s.Rec = rolloutrecord.Record{DeferredUntil: time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "configmap/a")
			assert.True(t, d.ClearRolloutNow)
			assert.True(t, d.Record.DeferredUntil.IsZero())
		}},
		{"the window opened: rolls", func(t *testing.T) situation {
			s := windowed(t, "configmap/a=2")
			s.Now, s.WaveHash = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC), hash("h2")
			s.Rec = rolloutrecord.Record{DeferredUntil: s.Now}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultRolled, d.Result)
			assert.True(t, d.Record.DeferredUntil.IsZero())
		}},
		{"deferred, then the config taken back: nothing waits", func(t *testing.T) situation {
			s := windowed(t, "configmap/a=1")
			s.Rec = rolloutrecord.Record{DeferredUntil: time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultUnchanged, d.Result)
			assert.Equal(t, "missing", d.Write)
			assert.Equal(t, rolloutrecord.Record{}, d.Record)
		}},
		{"approval manual and a window: approved, it still waits for the window", func(t *testing.T) situation {
			s := windowed(t, "configmap/a=2")
			s.Approval = approval.Gate{Manual: true}
			s.Approval.Approved = s.changeID()
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultDeferred, d.Result)
			assert.False(t, d.ClearApproval, "the approval stays for the rollout at the window's opening")
		}},
		{"a followed source incomplete (a TLS pair half-written): the rollout waits, said once, the record says since when", func(t *testing.T) situation {
			return incomplete(t, rolloutrecord.Record{})
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultIncomplete, d.Result)
			assert.Equal(t, "missing", d.Write, "only the rollout record")
			assert.Empty(t, d.InputsHash, "the template stays")
			assert.Equal(t, t0, d.Record.IncompleteSince)
			assert.Equal(t, "secret/tls: tls.crt and tls.key are not a pair (private key does not match public key)", d.Record.Incomplete)
			assert.Equal(t, 10*time.Minute+100*time.Millisecond, d.HoldFor, "looked at again when the wait is over (or at once when the Secret changes)")
			require.Len(t, d.Events, 1)
			assert.Equal(t, "ConfigSourceIncomplete", d.Events[0].Reason)
			assert.Equal(t, corev1.EventTypeWarning, d.Events[0].Type)
			assert.Contains(t, d.Events[0].Message, "at most until 2026-11-25T09:10:00Z")
		}},
		{"incomplete, just restarted: the wait counts from the record, nothing said again", func(t *testing.T) situation {
			return incomplete(t, rolloutrecord.Record{Incomplete: "secret/tls: tls.crt and tls.key are not a pair (private key does not match public key)", IncompleteSince: t0.Add(-4 * time.Minute)})
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultIncomplete, d.Result)
			assert.Empty(t, d.Write)
			assert.Empty(t, d.Events)
			assert.Equal(t, 6*time.Minute+100*time.Millisecond, d.HoldFor)
		}},
		{"incomplete past --source-ready-timeout: rolls all the same, and says so", func(t *testing.T) situation {
			s := incomplete(t, rolloutrecord.Record{Incomplete: "secret/tls: x", IncompleteSince: t0.Add(-11 * time.Minute)})
			s.WaveHash = hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			rolledSaying(t, d, "secret/tls", "ConfigSourceIncomplete")
			assert.True(t, d.Record.IncompleteSince.IsZero(), "the wait is over")
			assert.Empty(t, d.Record.Incomplete)
		}},
		{"incomplete, then complete: rolls, the wait forgotten, nothing more said", func(t *testing.T) situation {
			s := incomplete(t, rolloutrecord.Record{Incomplete: "secret/tls: x", IncompleteSince: t0.Add(-time.Minute)})
			s.Incomplete, s.WaveHash = nil, hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			rolledSaying(t, d, "secret/tls")
			assert.True(t, d.Record.IncompleteSince.IsZero())
		}},
		{"incomplete, rollout-now: rolls at once", func(t *testing.T) situation {
			s := incomplete(t, rolloutrecord.Record{})
			s.RolloutNow, s.WaveHash = true, hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			rolledSaying(t, d, "secret/tls", "ConfigSourceIncomplete")
			assert.True(t, d.ClearRolloutNow)
		}},
		{"a source incomplete before and unchanged, another changed: rolls without waiting for it", func(t *testing.T) situation {
			s := incomplete(t, rolloutrecord.Record{})
			s.Inputs, s.Record, s.WaveHash = inputs("configmap/a=2", "secret/tls=1"), keyed("configmap/a=1,secret/tls=1"), hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			rolledSaying(t, d, "configmap/a")
		}},
		{"incomplete, outside the rollout window: deferred, and the wait goes on counting from when it began", func(t *testing.T) situation {
			s := incomplete(t, rolloutrecord.Record{Incomplete: "secret/tls: x", IncompleteSince: t0.Add(-4 * time.Minute)})
			w, err := window.Parse("Sat 10:00-11:00 UTC")
			require.NoError(t, err)
			s.Window = w
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultDeferred, d.Result)
			assert.Equal(t, t0.Add(-4*time.Minute), d.Record.IncompleteSince, "not started again at the window's opening")
		}},
		{"a record noting an undo, written again once the hold is over (the config reverted): the note and its failure go", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=1"))
			s.Rec = rolloutrecord.Record{Change: "configmap/a", Started: t0, Failed: "crash", UndoneFrom: "rev-bad", UndoneAt: t0}
			s.HasRecord = false // the pods run the current config, not yet recorded so: a baseline write
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, "baseline", d.Write)
			assert.Equal(t, "configmap/a", d.Record.Change, "the record written is the one read")
			assert.Empty(t, d.Record.UndoneFrom)
			assert.Empty(t, d.Record.Failed)
		}},
		{"incomplete, --source-ready-timeout 0: never waits", func(t *testing.T) situation {
			s := incomplete(t, rolloutrecord.Record{})
			s.SourceReadyTimeout, s.WaveHash = 0, hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			rolledSaying(t, d, "secret/tls", "ConfigSourceIncomplete")
		}},
		{"a followed source flapping: braked until it is quiet, said once", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Braked, s.BrakedUntil = []string{"configmap/a"}, t0.Add(40*time.Second)
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultBraked, d.Result)
			assert.Empty(t, d.Write, "nothing written: the record keeps what the pods run")
			assert.Equal(t, 40*time.Second+100*time.Millisecond, d.HoldFor)
			assert.Equal(t, "configmap/a", d.BrakeSaid)
			require.Len(t, d.Events, 1)
			assert.Equal(t, "ConfigFlapping", d.Events[0].Reason)
			assert.Equal(t, corev1.EventTypeWarning, d.Events[0].Type)
		}},
		{"braked, said already: nothing said again", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Braked, s.BrakedUntil, s.BrakeSaid = []string{"configmap/a"}, t0.Add(40*time.Second), "configmap/a"
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultBraked, d.Result)
			assert.Empty(t, d.Events)
		}},
		{"braked, rollout-now: rolls", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=2"))
			s.Braked, s.BrakedUntil, s.RolloutNow, s.WaveHash = []string{"configmap/a"}, t0.Add(40*time.Second), true, hash("h2")
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			wantRollout(t, d, "configmap/a")
			assert.Empty(t, d.BrakeSaid)
		}},
		{"braked with an approval given meanwhile: the approval stays for its change", func(t *testing.T) situation {
			s := manual(t, "configmap/a=2")
			s.Braked, s.BrakedUntil = []string{"configmap/a"}, t0.Add(40*time.Second)
			s.Approval.Approved = s.changeID()
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultBraked, d.Result)
			assert.False(t, d.ClearApproval)
		}},
		{"approved, then deferred to the window: it waits for the window only", func(t *testing.T) situation {
			s := windowed(t, "configmap/a=2")
			s.Approval = approval.Gate{Manual: true}
			s.Approval.Approved = s.changeID()
			s.Rec = rolloutrecord.Record{Pending: "configmap/a", PendingID: s.changeID(), PendingSince: t0.Add(-time.Hour)}
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultDeferred, d.Result)
			assert.Empty(t, d.Record.PendingID, "no longer waiting for a person: not counted as pending, not shown as such")
			assert.True(t, d.PendingSince.IsZero())
		}},
		{"rollout-now left when nothing waits: removed, so it decides no later change", func(t *testing.T) situation {
			s := windowed(t, "configmap/a=1")
			s.RolloutNow = true
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultUnchanged, d.Result)
			assert.True(t, d.ClearRolloutNow)
			assert.Equal(t, "missing", d.Write)
		}},
		{"braked, but the pods run the current config: nothing to brake", func(t *testing.T) situation {
			s := wave(t, inputs("configmap/a=1"))
			s.Braked, s.BrakedUntil = []string{"configmap/a"}, t0.Add(40*time.Second)
			return s
		}, func(t *testing.T, d decision, err error) {
			require.NoError(t, err)
			assert.Equal(t, ResultUnchanged, d.Result)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s(t)
			d, err := plan(s)
			tt.check(t, d, err)
			// Wave's hash of a Secret is an oracle for guesses of its value: no part of any hash
			// goes to an Event, which any reader of the namespace sees, or to a log line.
			for _, h := range []string{d.Hash, d.InputsHash, s.CurrentHash} {
				if h == "" {
					continue
				}
				for _, e := range d.Events {
					assert.NotContains(t, e.Message, h[:min(8, len(h))], "Event %s", e.Reason)
				}
				if d.Log != nil {
					assert.NotContains(t, fmt.Sprint(d.Log.KV...), h[:min(8, len(h))], "log line %q", d.Log.Msg)
				}
			}
		})
	}
}
