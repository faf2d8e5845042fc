// A real OpenID Connect provider process for the portal's sign-in tests (mockoidc, from the Go
// module proxy). It signs in whoever the test queued next, with no login page, so the tests drive
// the whole authorization-code flow over HTTP; a queued user may carry another audience to check
// that the portal refuses an ID token minted for someone else.
//
// Usage: oidc-provider -client-id ID -client-secret SECRET
// Prints one JSON line {"issuer": ..., "control": ...} once both listeners are up.
// POST {control}/users with {"sub", "email", "email_verified", "name", "audience"} queues a user.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

type user struct {
	Sub           string `json:"sub"`
	Email         string `json:"email"`
	EmailVerified bool   `json:"email_verified"`
	Name          string `json:"name"`
	Audience      string `json:"audience"`
}

type claims struct {
	*mockoidc.IDTokenClaims
	Email         string `json:"email,omitempty"`
	EmailVerified bool   `json:"email_verified"`
	Name          string `json:"name,omitempty"`
}

func (u *user) ID() string { return u.Sub }

func (u *user) Userinfo(_ []string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"sub": u.Sub, "email": u.Email, "email_verified": u.EmailVerified, "name": u.Name,
	})
}

func (u *user) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	if u.Audience != "" {
		base.Audience = jwt.ClaimStrings{u.Audience}
	}
	return &claims{IDTokenClaims: base, Email: u.Email, EmailVerified: u.EmailVerified, Name: u.Name}, nil
}

func control(m *mockoidc.MockOIDC) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/users", func(w http.ResponseWriter, r *http.Request) {
		var u user
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&u) != nil || u.Sub == "" {
			http.Error(w, "POST a JSON user with at least sub", http.StatusBadRequest)
			return
		}
		m.QueueUser(&u)
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// mockoidc writes expires_in as a Go duration (nanoseconds); RFC 6749 says seconds, and a client
// that believes it computes a date thousands of years away. Rewrite it on the way out.
func secondsExpiry(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != mockoidc.TokenEndpoint {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var fields map[string]any
		if rec.Code == http.StatusOK && json.Unmarshal(body, &fields) == nil {
			if ns, ok := fields["expires_in"].(float64); ok {
				fields["expires_in"] = int64(ns / float64(time.Second))
				body, _ = json.Marshal(fields)
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

func main() {
	clientID := flag.String("client-id", "portal", "the only client this provider knows")
	clientSecret := flag.String("client-secret", "portal-secret", "that client's secret")
	flag.Parse()

	m, err := mockoidc.NewServer(nil)
	if err != nil {
		log.Fatal(err)
	}
	m.ClientID, m.ClientSecret = *clientID, *clientSecret
	if err := m.AddMiddleware(secondsExpiry); err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		log.Fatal(err)
	}
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ready, _ := json.Marshal(map[string]string{"issuer": m.Issuer(), "control": "http://" + cl.Addr().String()})
	fmt.Fprintln(os.Stdout, string(ready))
	log.Fatal(http.Serve(cl, control(m)))
}
