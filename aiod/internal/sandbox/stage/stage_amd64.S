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
# Arguments (argv; the environment the stage gets is empty):
#
#   argv[0]  any name
#   argv[1]  six bytes, each 0x80|v (never a NUL): the user namespace's
#            descriptor, the mount namespace's, this program's own, and
#            k, the number of the command's arguments, in three 7-bit
#            groups, lowest first
#   argv[2]  the directory to change to, inside
#   argv[3]  the command's program
#   argv[4 .. 4+k-1]      the command's arguments (argv[0] first)
#   argv[4+k]             a placeholder, overwritten with the NULL that
#                         ends the command's arguments
#   argv[4+k+1 ..]        the command's environment, ended by the NULL
#                         that ends argv
#
# Steps: join the mount namespace (setns; the process is single-threaded,
# so its file-system attributes are its own); close the three
# descriptors; change to the directory; drop from the bounding set every
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

	.intel_syntax noprefix
	.text
	.globl _start
_start:
	lea	r12, [rsp+8]		# r12: argv
	mov	r13, [r12+8]		# r13: the control bytes

	# setns(mount namespace, CLONE_NEWNS)
	movzx	edi, byte ptr [r13+1]
	and	edi, 0x7f
	mov	esi, 0x20000
	mov	eax, 308
	syscall
	test	rax, rax
	jnz	fail_enter

	# close the three descriptors
	xor	ebp, ebp
1:	movzx	edi, byte ptr [r13+rbp]
	and	edi, 0x7f
	mov	eax, 3
	syscall
	inc	ebp
	cmp	ebp, 3
	jb	1b

	# chdir(argv[2])
	mov	rdi, [r12+16]
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

	# k, the command's argument count
	movzx	eax, byte ptr [r13+3]
	and	eax, 0x7f
	movzx	ecx, byte ptr [r13+4]
	and	ecx, 0x7f
	shl	ecx, 7
	or	eax, ecx
	movzx	ecx, byte ptr [r13+5]
	and	ecx, 0x7f
	shl	ecx, 14
	or	eax, ecx

	# execve(argv[3], &argv[4], &argv[4+k+1])
	lea	rsi, [r12+32]
	lea	rdx, [rsi+rax*8]
	mov	qword ptr [rdx], 0
	add	rdx, 8
	mov	rdi, [r12+24]
	mov	eax, 59
	syscall

	# the exec failed: "sandbox: PROGRAM: WHY"
	mov	rbx, rax		# -errno
	lea	rsi, [rip+m_prefix]
	call	puts
	mov	rsi, [r12+24]
	call	puts
	call	why
	mov	edi, 126
	cmp	rbx, -2			# ENOENT
	je	5f
	cmp	rbx, -20		# ENOTDIR
	jne	exit
5:	mov	edi, 127
	jmp	exit

fail_chdir:				# "sandbox: cannot change to directory DIR: WHY"
	mov	rbx, rax
	lea	rsi, [rip+m_prefix]
	call	puts
	lea	rsi, [rip+m_chdir]
	call	puts
	mov	rsi, [r12+16]
	call	puts
	call	why
	mov	edi, 1
	jmp	exit

fail_enter:				# "sandbox: cannot enter the machine: WHY"
	mov	rbx, rax
	lea	rsi, [rip+m_prefix]
	call	puts
	lea	rsi, [rip+m_enter]
	call	puts
	call	why
	mov	edi, 1

exit:
	mov	eax, 231		# exit_group
	syscall

# why writes ": " and the text of the error -rbx, then a newline.
why:
	lea	rsi, [rip+m_sep]
	call	puts
	lea	rsi, [rip+m_enoent]
	cmp	rbx, -2
	je	6f
	lea	rsi, [rip+m_enotdir]
	cmp	rbx, -20
	je	6f
	lea	rsi, [rip+m_eacces]
	cmp	rbx, -13
	je	6f
	lea	rsi, [rip+m_enoexec]
	cmp	rbx, -8
	je	6f
	lea	rsi, [rip+m_eperm]
	cmp	rbx, -1
	je	6f
	lea	rsi, [rip+m_other]
6:	call	puts
	lea	rsi, [rip+m_nl]
	jmp	puts

# puts writes the NUL-terminated string at rsi on the standard error.
puts:
	xor	edx, edx
7:	cmp	byte ptr [rsi+rdx], 0
	je	8f
	inc	rdx
	jmp	7b
8:	mov	edi, 2
	mov	eax, 1
	syscall
	ret

m_prefix:	.asciz "sandbox: "
m_chdir:	.asciz "cannot change to directory "
m_enter:	.asciz "cannot enter the machine"
m_sep:		.asciz ": "
m_enoent:	.asciz "No such file or directory"
m_enotdir:	.asciz "Not a directory"
m_eacces:	.asciz "Permission denied"
m_enoexec:	.asciz "Exec format error"
m_eperm:	.asciz "Operation not permitted"
m_other:	.asciz "Cannot execute"
m_nl:		.asciz "\n"
