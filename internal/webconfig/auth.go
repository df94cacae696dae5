package webconfig

import (
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/time/rate"
	"k8s.io/klog/v2"
)

// handler reads the file again for each request: its rate limit, headers and basic auth users.
type handler struct {
	path    string
	next    http.Handler
	limiter *rate.Limiter
	cache   *authCache
	// bcryptMu runs one bcrypt comparison at a time: each costs tens of milliseconds of CPU.
	bcryptMu sync.Mutex
}

// unknownUserHash is a bcrypt hash ("fakepassword") compared for a user the file does not list,
// so that the answer takes as long as for a listed one and tells nothing of who exists.
const unknownUserHash = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := load(h.path)
	if err != nil {
		klog.ErrorS(err, "cannot read the web config file; answering 500 until it can be read", "file", h.path)
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return
	}
	if h.limiter != nil && !h.limiter.Allow() {
		http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
		return
	}
	for k, v := range c.HTTP.Headers {
		w.Header().Set(k, v)
	}
	if len(c.Users) == 0 {
		h.next.ServeHTTP(w, r)
		return
	}
	if user, pass, ok := r.BasicAuth(); ok && h.allowed(c.Users, user, pass) {
		h.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("WWW-Authenticate", "Basic")
	http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
}

// allowed compares the password with the user's hash, remembering the answer for the same user,
// hash and password so that a client polling with the right password costs one comparison.
func (h *handler) allowed(users map[string]secret, user, pass string) bool {
	hash, known := users[user]
	if !known {
		hash = unknownUserHash
	}
	key := strings.Join([]string{hex.EncodeToString([]byte(user)), hex.EncodeToString([]byte(hash)), hex.EncodeToString([]byte(pass))}, ":")
	ok, cached := h.cache.get(key)
	if !cached {
		h.bcryptMu.Lock()
		err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(pass))
		h.bcryptMu.Unlock()
		ok = known && err == nil
		h.cache.set(key, ok)
	}
	return ok && known
}

// authCacheSize bounds the remembered answers; past it a tenth of them, chosen at random, go.
const authCacheSize = 100

type authCache struct {
	mu sync.Mutex
	m  map[string]bool
}

func newAuthCache() *authCache { return &authCache{m: map[string]bool{}} }

func (c *authCache) get(key string) (ok, cached bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok, cached = c.m[key]
	return ok, cached
}

func (c *authCache) set(key string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= authCacheSize {
		drop := max(len(c.m)/10, 1)
		for range drop {
			n, i := rand.IntN(len(c.m)), 0
			for k := range c.m {
				if i == n {
					delete(c.m, k)
					break
				}
				i++
			}
		}
	}
	c.m[key] = ok
}
