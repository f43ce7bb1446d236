# The stage of a whole machine's process, for x86-64 Linux: the program
# that runs between the host's nsenter (which has joined the machine's
# user namespace and made the process root there) and the command. See
# stage_linux.go in the package above for why it exists; this is its
# fast form, a static program of a few hundred bytes that loads nothing
# (no ld.so, no library, no file of the machine's).
#
# stagecode_amd64.go holds the bytes GNU as makes of this file's .text;
# TestStageCode assembles it again and fails when they differ
# (go test -run TestStageCode -update writes them).
#
# Arguments: argv[1] is five bytes, each 0x80|fd (never a NUL): the
# descriptors of the user namespace, the mount namespace, this program,
# the command and nsenter, all closed before the exec. The environment
# the stage gets is empty. The command descriptor is a sealed memory
# file the daemon wrote (stageCommand):
#
#   u32 k, u32 m (little-endian), then k+m+2 strings, each ended by a
#   NUL: the directory to change to, the program, its k arguments
#   (argv[0] first), its m environment entries.
#
# It is not in argv so that no other account, of the host or of the
# machine, reads the command's environment in /proc/PID/cmdline.
#
# Steps: join the mount namespace (setns; the process is single-threaded,
# so its file-system attributes are its own); map the command file
# (private, writable: nothing is written to it); close the
# descriptors; build the argument and environment arrays in an anonymous
# mapping; change to the directory; drop from the bounding set every
# capability not in MASK (PR_CAPBSET_DROP; the kernel's last capability
# ends the loop with EINVAL); execute the command (execve). Root's exec
# computes its capabilities from the bounding set, so the command holds
# MASK at most. A failure writes "sandbox: ..." on the standard error
# and exits: 127 when the program is not found, 126 when it cannot be
# executed, 1 otherwise.
#
# MASK is containerCaps (caps_linux.go): CHOWN DAC_OVERRIDE FOWNER
# FSETID KILL SETGID SETUID SETPCAP NET_BIND_SERVICE NET_RAW SYS_CHROOT
# MKNOD AUDIT_WRITE SETFCAP; TestStageCode checks that they agree.
#
# Registers kept across calls: r12 argv, r13 the control bytes, r14 the
# command file's mapping, r15 the pointer array (directory, program,
# argv..., NULL, env..., NULL).

	.intel_syntax noprefix
	.text
	.globl _start
_start:
	lea	r12, [rsp+8]
	mov	r13, [r12+8]

	# setns(mount namespace, CLONE_NEWNS)
	movzx	edi, byte ptr [r13+1]
	and	edi, 0x7f
	mov	esi, 0x20000
	mov	eax, 308
	syscall
	test	rax, rax
	jnz	fail_enter

	# fstat(command file): its size is st_size, at 48
	sub	rsp, 144
	movzx	edi, byte ptr [r13+3]
	and	edi, 0x7f
	mov	rsi, rsp
	mov	eax, 5
	syscall
	mov	rsi, [rsp+48]
	add	rsp, 144
	test	rax, rax
	jnz	fail_enter

	# mmap(NULL, size, PROT_READ|PROT_WRITE, MAP_PRIVATE, fd, 0)
	xor	edi, edi
	mov	edx, 3
	mov	r10d, 2
	movzx	r8d, byte ptr [r13+3]
	and	r8d, 0x7f
	xor	r9d, r9d
	mov	eax, 9
	syscall
	cmp	rax, -4096
	ja	fail_enter
	mov	r14, rax

	# close the descriptors, up to the control bytes' end
	xor	ebp, ebp
1:	movzx	edi, byte ptr [r13+rbp]
	test	edi, edi
	jz	12f
	and	edi, 0x7f
	mov	eax, 3
	syscall
	inc	ebp
	jmp	1b
12:

	# the pointer array: mmap(NULL, (k+m+4)*8, PROT_READ|PROT_WRITE,
	# MAP_PRIVATE|MAP_ANONYMOUS, -1, 0)
	mov	eax, dword ptr [r14]
	mov	ecx, dword ptr [r14+4]
	add	rax, rcx
	lea	rsi, [rax*8+32]
	xor	edi, edi
	mov	edx, 3
	mov	r10d, 0x22
	mov	r8, -1
	xor	r9d, r9d
	mov	eax, 9
	syscall
	cmp	rax, -4096
	ja	fail_enter
	mov	r15, rax

	# fill it: the directory, the program and the k arguments, a NULL,
	# the m environment entries, a NULL
	mov	rdi, r15
	lea	rsi, [r14+8]
	mov	ecx, dword ptr [r14]
	add	ecx, 2
	call	strings
	mov	qword ptr [rdi], 0
	add	rdi, 8
	mov	ecx, dword ptr [r14+4]
	call	strings
	mov	qword ptr [rdi], 0

	# chdir(directory)
	mov	rdi, [r15]
	mov	eax, 80
	syscall
	test	rax, rax
	jnz	fail_chdir

	# the bounding set: drop each capability not in MASK
	xor	ebp, ebp
2:	movabs	rax, 0xa80425fb		# MASK
	bt	rax, rbp
	jc	3f
	mov	edi, 24			# PR_CAPBSET_DROP
	mov	esi, ebp
	xor	edx, edx
	xor	r10d, r10d
	xor	r8d, r8d
	mov	eax, 157		# prctl
	syscall
	cmp	rax, -22		# EINVAL: past the kernel's last one
	je	4f
	test	rax, rax
	jnz	fail_enter
3:	inc	ebp
	cmp	ebp, 64
	jb	2b
4:

	# execve(program, argv, envp); envp is past argv's k+1 pointers
	mov	eax, dword ptr [r14]
	lea	rdx, [r15+rax*8+24]
	lea	rsi, [r15+16]
	mov	rdi, [r15+8]
	mov	eax, 59
	syscall

	mov	rbx, rax
	mov	rdi, [r15+8]
	jmp	exec_failed

fail_chdir:				# "sandbox: cannot change to directory DIR: WHY"
	lea	rsi, [rip+m_chdir]
	mov	rdi, [r15]
	jmp	fail

fail_enter:				# "sandbox: cannot enter the machine: WHY"
	lea	rsi, [rip+m_enter]
	xor	edi, edi
	jmp	fail

# strings stores at rdi the addresses of the ecx NUL-ended strings that
# follow each other from rsi, advancing rdi past them and rsi past the
# last one's NUL.
strings:
	test	ecx, ecx
	jz	7f
6:	mov	[rdi], rsi
	add	rdi, 8
8:	mov	al, byte ptr [rsi]
	inc	rsi
	test	al, al
	jnz	8b
	dec	ecx
	jnz	6b
7:	ret

	.include "errors.inc"
