# setid, for x86-64 Linux: the first program of every sandboxed process
# the daemon starts as root (spawn_linux.go explains why). It takes the
# sandbox's identity and executes the process's program, so that the
# moment a process of the sandbox could stop it (it has the sandbox's
# uid) comes after the daemon's start has returned: a stopped fork of
# the daemon's own image would hold a thread of the daemon suspended in
# vfork, and with it every stop of the world of the Go runtime.
#
# stagecode_amd64.go holds the bytes GNU as makes of this file's .text;
# TestStageCode assembles it again and fails when they differ.
#
# Arguments (the environment is the program's, passed through):
#
#   argv[1]  three bytes, each 0x80|v: the parent-death signal to set
#            again once the identity has changed (0: none), this
#            program's own descriptor (closed before the exec), and
#            flags: 1, keep the groups (no setgroups: a daemon in a user
#            namespace of its own may not call it)
#   argv[2]  the uid, argv[3] the gid, in decimal
#   argv[4]  the directory to change to ("": none)
#   argv[5]  the program
#   argv[6..] its arguments (argv[0] first)
#
# Steps: empty the bounding set (the daemon's spawner kept in it what
# this program needs: setidCaps, or a machine's containerCaps); then
# setgroups(0), setgid, setuid (root's capabilities go with it);
# the parent-death signal (a change of identity clears it); close this
# program's descriptor; change to the directory, as the sandbox's
# account, holding no descriptor of the daemon's (the daemon's fork
# held them all, and /proc/self/fd/N of a daemon's directory is a way
# out of the sandbox's view: the directory is never the fork's); execve. A failure writes "sandbox: ..." on the
# standard error and exits (127: the program is not found, 126: it
# cannot be executed, 1: the identity could not be taken).

	.intel_syntax noprefix
	.text
	.globl _start
_start:
	lea	r12, [rsp+8]		# r12: argv
	mov	r13, [r12+8]		# r13: the control bytes

	# empty the bounding set (it holds what this program needs, which
	# it has: the change of identity below clears the rest)
	xor	ebp, ebp
4:	mov	edi, 24			# PR_CAPBSET_DROP
	mov	esi, ebp
	xor	edx, edx
	xor	r10d, r10d
	xor	r8d, r8d
	mov	eax, 157
	syscall
	cmp	rax, -22		# EINVAL: past the kernel's last one
	je	5f
	test	rax, rax
	jnz	fail_id
	inc	ebp
	cmp	ebp, 64
	jb	4b
5:

	# setgroups(0, NULL), unless the flags keep the groups
	test	byte ptr [r13+2], 1
	jnz	7f
	xor	edi, edi
	xor	esi, esi
	mov	eax, 116
	syscall
	test	rax, rax
	jnz	fail_id
7:

	# setgid(argv[3])
	mov	rsi, [r12+24]
	call	atoi
	mov	edi, eax
	mov	eax, 106
	syscall
	test	rax, rax
	jnz	fail_id

	# setuid(argv[2])
	mov	rsi, [r12+16]
	call	atoi
	mov	edi, eax
	mov	eax, 105
	syscall
	test	rax, rax
	jnz	fail_id

	# prctl(PR_SET_PDEATHSIG, signal)
	movzx	esi, byte ptr [r13]
	and	esi, 0x7f
	jz	1f
	mov	edi, 1
	xor	edx, edx
	xor	r10d, r10d
	xor	r8d, r8d
	mov	eax, 157
	syscall
1:
	# close(own descriptor)
	movzx	edi, byte ptr [r13+1]
	and	edi, 0x7f
	mov	eax, 3
	syscall

	# chdir(argv[4]), unless empty
	mov	rdi, [r12+32]
	cmp	byte ptr [rdi], 0
	je	6f
	mov	eax, 80
	syscall
	test	rax, rax
	jnz	fail_chdir
6:
	# execve(argv[5], &argv[6], envp); envp follows argv's NULL
	mov	rax, [rsp]		# argc
	lea	rdx, [r12+rax*8+8]
	lea	rsi, [r12+48]
	mov	rdi, [r12+40]
	mov	eax, 59
	syscall
	mov	rbx, rax
	mov	rdi, [r12+40]
	jmp	exec_failed

fail_chdir:				# "sandbox: cannot change to directory DIR: WHY"
	lea	rsi, [rip+m_chdir]
	mov	rdi, [r12+32]
	jmp	fail

fail_id:				# "sandbox: cannot take the sandbox's identity: WHY"
	lea	rsi, [rip+m_id]
	xor	edi, edi
	jmp	fail

# atoi returns in eax the decimal number at rsi (digits up to the NUL).
atoi:
	xor	eax, eax
2:	movzx	ecx, byte ptr [rsi]
	test	ecx, ecx
	jz	3f
	imul	eax, eax, 10
	sub	ecx, 48
	add	eax, ecx
	inc	rsi
	jmp	2b
3:	ret

m_id:		.asciz "cannot take the sandbox's identity"
	.include "errors.inc"
