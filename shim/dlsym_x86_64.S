/* The dlsym hook's entry. dlsym(RTLD_NEXT, ...) finds "the next object after the caller", and
 * glibc learns the caller from its return address, so such lookups must reach the real dlsym
 * by a tail jump that leaves the caller's return address in place. Every other lookup goes to
 * cg_dlsym_hook (dlsym.c), which may hand out a wrapper instead of a driver entry point. */
	.section .note.GNU-stack,"",@progbits
	.text
	.p2align 4
	.globl dlsym
	.type dlsym,@function
dlsym:
	cmpq $-1, %rdi              /* RTLD_NEXT */
	jne cg_dlsym_hook
	push %rdi
	push %rsi
	sub $8, %rsp
	call cg_resolve_real_dlsym  /* cached after the first call */
	add $8, %rsp
	pop %rsi
	pop %rdi
	test %rax, %rax
	jz 1f
	jmp *%rax
1:	xor %eax, %eax
	ret
	.size dlsym, .-dlsym
