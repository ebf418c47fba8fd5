/* The common part of every default-deny trampoline (deny.h). On entry %r11d holds the slot;
 * argument registers and the caller's stack are exactly as the caller left them. We save the
 * integer and vector argument registers, ask cg_deny_enter for the real target (it flushes
 * pending work), restore everything and tail-jump, so the real function sees the original call. */
	.section .note.GNU-stack,"",@progbits
	.text
	.p2align 4
	.globl cg_deny_common
	.hidden cg_deny_common
	.type cg_deny_common,@function
cg_deny_common:
	push %rbp
	mov %rsp, %rbp
	push %rdi
	push %rsi
	push %rdx
	push %rcx
	push %r8
	push %r9
	push %rax            /* %al: vector register count of variadic calls */
	sub $136, %rsp       /* 8 xmm registers, keeps %rsp 16-byte aligned at the call */
	movdqu %xmm0, 0(%rsp)
	movdqu %xmm1, 16(%rsp)
	movdqu %xmm2, 32(%rsp)
	movdqu %xmm3, 48(%rsp)
	movdqu %xmm4, 64(%rsp)
	movdqu %xmm5, 80(%rsp)
	movdqu %xmm6, 96(%rsp)
	movdqu %xmm7, 112(%rsp)
	mov %r11d, %edi
	call cg_deny_enter
	mov %rax, %r11
	movdqu 0(%rsp), %xmm0
	movdqu 16(%rsp), %xmm1
	movdqu 32(%rsp), %xmm2
	movdqu 48(%rsp), %xmm3
	movdqu 64(%rsp), %xmm4
	movdqu 80(%rsp), %xmm5
	movdqu 96(%rsp), %xmm6
	movdqu 112(%rsp), %xmm7
	add $136, %rsp
	pop %rax
	pop %r9
	pop %r8
	pop %rcx
	pop %rdx
	pop %rsi
	pop %rdi
	pop %rbp
	jmp *%r11
	.size cg_deny_common, .-cg_deny_common
