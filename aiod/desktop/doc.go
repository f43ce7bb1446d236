// Package desktop is the computer-use worker (`aiod computer-use`): an
// HTTP server on AIO_COMPUTER_USE_LISTEN that drives the X display named
// by DISPLAY. It serves /v2/computer/* itself (aiod's computer plane
// forwards to it unchanged): screenshots read in-process from the X
// server, input through xdotool with key names checked before anything
// is sent, the clipboard through xclip, windows, and screen recording
// through ffmpeg. Accessibility answers the documented 501.
//
// Input runs one action or batch at a time, in the order the requests
// arrived. A request whose client leaves while it waits is never run,
// and a batch whose client leaves stops before its next action. A
// request that has waited 15 s for the display answers 503 "the display
// is busy: ..." (retryable), well before aiod's computer plane gives up
// on the worker (one minute). TYPING with use_clipboard false types key
// by key and takes at most 2000 characters (about 16 s), in one action
// and in a batch together; longer text is a 422 (the clipboard path
// pastes up to 1 MiB).
//
// Every X request waits at most 3 s for its reply: an X server that does
// not answer (stopped, wedged) makes the routes answer 503 (capabilities
// "absent") within about 5 s, the connection is dropped and dialled
// again, and input is sent only after a round trip shows the server
// answers, so none runs later when a stopped server resumes.
//
// Recording writes MP4 whatever save_path's name; a save_path that
// exists and is not a regular file is a 400. A recording that ended in
// error (ffmpeg failed: a full disk, the display gone, a stop it did not
// finish within 10 s) still reads status "stopped", with data.error
// saying why (null otherwise) and ffmpeg's output in the log.
package desktop
