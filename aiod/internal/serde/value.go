package serde

// ValueError is a value_error at loc (such as "body", "timeout"): the
// 422 for a field that decoded but whose value a route refuses. loc is
// copied.
func ValueError(msg string, loc ...string) *Error {
	return &Error{Location: append([]string(nil), loc...), Message: msg, Type: TypeValue}
}
