/* The dlsym and dlvsym hooks' entries. cg_dlsym_route / cg_dlvsym_route (dlsym.c) return either
 * a value or the real function to jump to; the jump leaves the caller's return address in place,
 * and glibc picks the scope of RTLD_DEFAULT and RTLD_NEXT lookups from it. */
	.section .note.GNU-stack,"",@progbits
	.text
	.p2align 4
	.globl dlsym
	.type dlsym,@function
dlsym:
	push %rdi
	push %rsi
	sub $8, %rsp                /* 16-byte aligned call */
	call cg_dlsym_route         /* rax: value, rdx: the real dlsym or 0 */
	add $8, %rsp
	pop %rsi
	pop %rdi
	test %rdx, %rdx
	jz 1f
	jmp *%rdx
1:	ret
	.size dlsym, .-dlsym

	.p2align 4
	.globl dlvsym
	.type dlvsym,@function
dlvsym:
	push %rdi
	push %rsi
	push %rdx                   /* three pushes: 16-byte aligned call */
	call cg_dlvsym_route        /* rax: value, rdx: the real dlvsym or 0 */
	mov %rdx, %r11              /* scratch, not an argument */
	pop %rdx
	pop %rsi
	pop %rdi
	test %r11, %r11
	jz 1f
	jmp *%r11
1:	ret
	.size dlvsym, .-dlvsym
