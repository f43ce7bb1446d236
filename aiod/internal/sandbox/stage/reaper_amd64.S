# The second stage of a sandbox's init, for x86-64 Linux: what init
# becomes once the view is built and init has confined itself (see
# reexecConfined in caps_linux.go, and init_linux.go). Its Go form is the
# daemon's binary started again, which costs the Go runtime's and every
# package's start (about 20 ms, a fifth of a cold create); this static
# program of some hundred bytes does the same work and loads nothing.
#
# stagecode_amd64.go holds the bytes GNU as makes of this file's .text;
# TestStageCode assembles it again and fails when they differ.
#
# Steps: name the process "sandbox-init" (PR_SET_NAME: what ps shows);
# make it not dumpable (PR_SET_DUMPABLE 0: a process of the sandbox of
# init's uid cannot ptrace it or open its memory); ignore SIGCHLD (the
# kernel then reaps every orphan the sandbox leaves to PID 1, so no
# reaping loop is needed); close every descriptor from 4 up
# (close_range: what init's first stage still held); report success (an
# empty line on descriptor 3, then close it); read the standard input
# (the daemon's keep-alive pipe) until it ends, and exit 0. A failure
# of the first three steps reports its errno on descriptor 3 and exits
# 1, as the Go form would.

	.intel_syntax noprefix
	.text
	.globl _start
_start:
	# prctl(PR_SET_NAME, "sandbox-init")
	mov	edi, 15
	lea	rsi, [rip+m_name]
	xor	edx, edx
	xor	r10d, r10d
	xor	r8d, r8d
	mov	eax, 157
	syscall
	test	rax, rax
	jnz	fail

	# prctl(PR_SET_DUMPABLE, 0)
	mov	edi, 4
	xor	esi, esi
	mov	eax, 157
	syscall
	test	rax, rax
	jnz	fail

	# rt_sigaction(SIGCHLD, {SIG_IGN}, NULL, 8)
	mov	edi, 17
	lea	rsi, [rip+sigact]
	xor	edx, edx
	mov	r10d, 8
	mov	eax, 13
	syscall
	test	rax, rax
	jnz	fail

	# close_range(4, ~0, 0); a kernel before 5.9 has none, and the
	# descriptors then stay (as with the Go form).
	mov	edi, 4
	mov	esi, -1
	xor	edx, edx
	mov	eax, 436
	syscall

	# the report: an empty line on 3
	mov	edi, 3
	lea	rsi, [rip+m_nl]
	mov	edx, 1
	mov	eax, 1
	syscall
	mov	edi, 3
	mov	eax, 3
	syscall

	# wait for the daemon: read 0 until it ends (0) or fails (not EINTR)
	sub	rsp, 64
1:	xor	edi, edi
	mov	rsi, rsp
	mov	edx, 64
	xor	eax, eax
	syscall
	test	rax, rax
	jg	1b
	cmp	rax, -4			# EINTR
	je	1b
	xor	edi, edi
	mov	eax, 231		# exit_group
	syscall

fail:					# "sandbox init: errno N\n" on 3, exit 1
	neg	rax
	mov	rbx, rax
	mov	edi, 3
	lea	rsi, [rip+m_fail]
	mov	edx, m_fail_len
	mov	eax, 1
	syscall
	# the number, in decimal, built backwards on the stack
	lea	rsi, [rsp-1]
	mov	byte ptr [rsi], 10	# the newline
	mov	rax, rbx
	mov	ecx, 10
2:	xor	edx, edx
	div	rcx
	add	dl, 48
	dec	rsi
	mov	byte ptr [rsi], dl
	test	rax, rax
	jnz	2b
	lea	rdx, [rsp]
	sub	rdx, rsi
	mov	edi, 3
	mov	eax, 1
	syscall
	mov	edi, 1
	mov	eax, 231
	syscall

	.balign	8
sigact:	.quad	1			# sa_handler: SIG_IGN
	.quad	0			# sa_flags
	.quad	0			# sa_restorer
	.quad	0			# sa_mask
m_name:	.asciz	"sandbox-init"
m_nl:	.ascii	"\n"
m_fail:	.ascii	"sandbox init: errno "
	.set	m_fail_len, . - m_fail
