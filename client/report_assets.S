/* client/report_assets.S - report.js and report.css in the binary
 *
 * pilot report writes a page that needs no network and no file beside
 * it: its script and style are kept as source files and included here
 * whole at build time (the Makefile makes this object depend on them). */
    .section .rodata
    .global pl_report_js
    .global pl_report_js_end
    .global pl_report_css
    .global pl_report_css_end
pl_report_js:
    .incbin "client/report.js"
pl_report_js_end:
    .byte 0
pl_report_css:
    .incbin "client/report.css"
pl_report_css_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
