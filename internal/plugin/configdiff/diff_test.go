package configdiff

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func cm(where string, data map[string]string) Content {
	c := Content{What: "configmap/app", Where: where, Data: map[string][]byte{}}
	for k, v := range data {
		c.Data[k] = []byte(v)
	}
	return c
}

func secret(where, typ string, data map[string]string) Content {
	c := cm(where, data)
	c.What, c.Secret, c.Type = "secret/db", true, typ
	return c
}

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a, b    Content
		want    string
		changed bool
	}{{
		name:    "a changed line of a ConfigMap, with context",
		a:       cm("revision 3, snapshot app-1111", map[string]string{"app.conf": "a=1\nb=2\nc=3\n", "same": "x"}),
		b:       cm("revision 4, snapshot app-2222", map[string]string{"app.conf": "a=1\nb=20\nc=3\n", "same": "x"}),
		want:    "--- configmap/app/app.conf (revision 3, snapshot app-1111)\n+++ configmap/app/app.conf (revision 4, snapshot app-2222)\n@@ -1,3 +1,3 @@\n a=1\n-b=2\n+b=20\n c=3\n",
		changed: true,
	}, {
		name: "nothing differs",
		a:    cm("revision 3", map[string]string{"k": "v"}),
		b:    cm("revision 4", map[string]string{"k": "v"}),
	}, {
		name:    "a Secret: keys and sizes, never a value",
		a:       secret("revision 3", "Opaque", map[string]string{"password": "hunter2", "user": "admin", "old": "x"}),
		b:       secret("revision 4", "Opaque", map[string]string{"password": "correct horse", "user": "admin", "new": "yz"}),
		want:    "secret/db key \"new\": added (2 bytes)\nsecret/db key \"old\": removed (was 1 bytes)\nsecret/db key \"password\": changed (7 bytes, now 13 bytes)\n",
		changed: true,
	}, {
		name:    "a Secret's type",
		a:       secret("revision 3", "Opaque", nil),
		b:       secret("revision 4", "kubernetes.io/tls", nil),
		want:    "secret/db: type Opaque in revision 3, kubernetes.io/tls in revision 4\n",
		changed: true,
	}, {
		name:    "a source added",
		a:       Content{What: "configmap/app", Where: "revision 3", Missing: true},
		b:       cm("revision 4", map[string]string{"b": "", "a": ""}),
		want:    "configmap/app: added in revision 4 (keys \"a\", \"b\")\n",
		changed: true,
	}, {
		name:    "a source removed",
		a:       cm("revision 3", nil),
		b:       Content{What: "configmap/app", Where: "revision 4", Missing: true},
		want:    "configmap/app: removed in revision 4 (was in revision 3)\n",
		changed: true,
	}, {
		name:    "terminal escapes and bidirectional overrides are shown, not obeyed",
		a:       cm("revision 3", map[string]string{"k": "ok\n"}),
		b:       cm("revision 4", map[string]string{"k": "\x1b[2Jgone\u202eevil\n"}),
		want:    "--- configmap/app/k (revision 3)\n+++ configmap/app/k (revision 4)\n@@ -1 +1 @@\n-ok\n+\\x1b[2Jgone\\x202eevil\n",
		changed: true,
	}, {
		name:    "binary data: sizes",
		a:       Content{What: "configmap/app", Where: "revision 3", Data: map[string][]byte{"logo": {0xff, 0}}, Binary: map[string]bool{"logo": true}},
		b:       Content{What: "configmap/app", Where: "revision 4", Data: map[string][]byte{"logo": {0xff, 1, 2}}, Binary: map[string]bool{"logo": true}},
		want:    "configmap/app key \"logo\": changed (2 bytes, now 3 bytes)\n",
		changed: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			changed, err := Write(&out, tc.a, tc.b)
			require.NoError(t, err)
			assert.Equal(t, tc.changed, changed)
			assert.Equal(t, tc.want, out.String())
		})
	}
}

// No value of a Secret reaches the output, whatever it holds and however it changed.
func FuzzWriteNeverShowsASecretValue(f *testing.F) {
	f.Add("password", "hunter2", "correct horse", "Opaque", "kubernetes.io/tls")
	f.Add("k", "", "\x1b]0;", "", "")
	f.Fuzz(func(t *testing.T, key, before, after, typeA, typeB string) {
		const marker = "SECRETVALUE"
		a := Content{What: "secret/db", Where: "revision 1", Secret: true, Type: typeA, Data: map[string][]byte{key: []byte(before + marker + "1"), "stays": []byte(marker + "2")}}
		b := Content{What: "secret/db", Where: "revision 2", Secret: true, Type: typeB, Data: map[string][]byte{key + "x": []byte(marker + "3" + after), key: []byte(after + marker + "4")}}
		if strings.Contains(key+typeA+typeB, marker) {
			t.Skip("the marker in a key or type, which are shown")
		}
		var out bytes.Buffer
		_, err := Write(&out, a, b)
		require.NoError(t, err)
		assert.NotContains(t, out.String(), marker)
	})
}
