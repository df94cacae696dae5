package webconfig

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	mathrand "math/rand/v2"
	"net/http"
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
	// accepted and refused remember the logins bcrypt has decided, apart, so that no number of
	// wrong logins can push a right one out: a scrape with the right password then costs no
	// comparison, however many wrong ones an attacker sends.
	accepted, refused *authCache
	// cacheKey is the HMAC key of the caches' digests, new for each handler, so that the caches
	// hold no password (nor a hash of one that could be looked up in a table made beforehand).
	cacheKey []byte
	// compare is bcrypt.CompareHashAndPassword; tests count the comparisons through it.
	compare func(hash, password []byte) error
	// bcryptMu runs one bcrypt comparison at a time: each costs tens of milliseconds of CPU.
	bcryptMu sync.Mutex
}

func newHandler(path string, next http.Handler) *handler {
	key := make([]byte, sha256.Size)
	_, _ = rand.Read(key) // never fails: crypto/rand crashes the program rather than return an error
	return &handler{path: path, next: next, accepted: newAuthCache(), refused: newAuthCache(), cacheKey: key,
		compare: bcrypt.CompareHashAndPassword}
}

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
// hash and password so that a client polling with the same password costs one comparison.
func (h *handler) allowed(users map[string]secret, user, pass string) bool {
	stored, known := users[user]
	hash := unknownUserHash(users) // made for a known user too, so both take the same steps
	if known {
		hash = []byte(stored)
	}
	key := h.digest(user, hash, pass)
	if h.accepted.has(key) {
		return known // a user removed since is no longer known; a stale hash no longer matches the key
	}
	if h.refused.has(key) {
		return false
	}
	h.bcryptMu.Lock()
	err := h.compare(hash, []byte(pass))
	h.bcryptMu.Unlock()
	if known && err == nil {
		h.accepted.add(key)
		return true
	}
	h.refused.add(key)
	return false
}

// digest is the caches' key for a login: an HMAC of user, hash and password, each but the last
// prefixed by its length so that no two logins share one.
func (h *handler) digest(user string, stored []byte, pass string) [sha256.Size]byte {
	mac := hmac.New(sha256.New, h.cacheKey)
	for _, field := range [][]byte{[]byte(user), stored} {
		mac.Write(binary.BigEndian.AppendUint64(nil, uint64(len(field))))
		mac.Write(field)
	}
	mac.Write([]byte(pass))
	return [sha256.Size]byte(mac.Sum(nil))
}

// unknownUserSaltAndDigest is the rest of a bcrypt hash ("fakepassword" at cost 10, the toolkit's)
// after its version and cost.
const unknownUserSaltAndDigest = "QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"

// unknownUserHash is compared for a user the file does not list, so that the answer takes as long
// as for a listed one and tells nothing of who exists. A bcrypt comparison takes as long as its
// hash's cost says, so this hash has the highest cost of the users' (the toolkit's always has
// cost 10, so with the users' hashes at 12 an unknown user is answered sooner). Where the users'
// costs differ, a user with a cheaper hash is still told apart; one tool makes them all alike.
// Only the cost counts: the salt and digest are a fixed hash's with its cost rewritten, which no
// password matches at the new cost, and a match would still be refused, the user being unknown.
// The file is read for each request, so this follows it; finding the costs reads only the hashes'
// prefixes.
func unknownUserHash(users map[string]secret) []byte {
	cost := 0
	for _, h := range users {
		if c, err := bcrypt.Cost([]byte(h)); err == nil {
			cost = max(cost, c)
		}
	}
	if cost == 0 { // no hash that bcrypt reads: comparing with any of them fails at once
		cost = bcrypt.DefaultCost
	}
	return fmt.Appendf(nil, "$2y$%02d$%s", cost, unknownUserSaltAndDigest)
}

// authCacheSize bounds each cache; past it a tenth of the entries, chosen at random, go.
const authCacheSize = 100

// authCache is a bounded set of login digests.
type authCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]struct{}
}

func newAuthCache() *authCache { return &authCache{m: map[[sha256.Size]byte]struct{}{}} }

func (c *authCache) has(key [sha256.Size]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[key]
	return ok
}

func (c *authCache) add(key [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= authCacheSize {
		drop := max(len(c.m)/10, 1)
		for range drop {
			n, i := mathrand.IntN(len(c.m)), 0
			for k := range c.m {
				if i == n {
					delete(c.m, k)
					break
				}
				i++
			}
		}
	}
	c.m[key] = struct{}{}
}
