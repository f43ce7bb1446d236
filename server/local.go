package server

// The console's requests to Computers (local calls): they go through the
// same relay as an Agent's, from a member of the office that has no
// socket (member.console), and are marked as the console's in the call
// log and in their spans.
