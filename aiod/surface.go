package aiod

import "net/http"

// apiSurface restricts next to the chosen API surface. SKELETON.
func apiSurface(surface string, next http.Handler) http.Handler { return next }
