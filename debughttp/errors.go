package debughttp

import (
	"fmt"

	"github.com/cockroachdb/errors"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrBadRequest is returned (as a 400 response) for an unknown, repeated
	// or malformed query parameter.
	ErrBadRequest = errors.New("debughttp: bad request")
	// ErrUnauthorized is returned (as a 401 response) when Options.Token is
	// set and the request does not carry it.
	ErrUnauthorized = errors.New("debughttp: missing or wrong bearer token")
	// ErrNoEndpoint is returned (as a 404 response) for a path that names no
	// endpoint.
	ErrNoEndpoint = errors.New("debughttp: no such endpoint")
	// ErrMethod is returned (as a 405 response) for a method other than GET
	// or HEAD.
	ErrMethod = errors.New("debughttp: method not allowed")
	// ErrNotLoopback is returned by Listen for an address that other hosts
	// could reach, without a token: the handler exposes the agent's whole
	// transcript.
	ErrNotLoopback = errors.New("debughttp: not a loopback address")
)

// ParamError says which query parameter of a request is wrong and why.
// errors.Is(err, ErrBadRequest) holds for it.
type ParamError struct {
	Param string // the query parameter
	Value string // its value, as given
	Why   string // what is wrong with it
}

// Error implements error.
func (e *ParamError) Error() string {
	return fmt.Sprintf("%s: %s=%q: %s", ErrBadRequest.Error(), e.Param, e.Value, e.Why)
}

// Unwrap returns ErrBadRequest.
func (e *ParamError) Unwrap() error { return ErrBadRequest }

// Format implements fmt.Formatter through errors.FormatError.
func (e *ParamError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }

// errorBody is the JSON body of every error response. Damaged says the
// error is damage found in the database (store.ErrCorrupt), whatever its
// message: a client tells it apart without parsing the message.
type errorBody struct {
	Error   string `json:"error"`
	Damaged bool   `json:"damaged,omitempty"`
}
