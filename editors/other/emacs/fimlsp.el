;;; fimlsp.el --- Use the fimlsp completion server from Eglot  -*- lexical-binding: t; -*-

;;; Commentary:

;; fimlsp is a language server that completes Python code with a local model.
;; This file tells Eglot how to start it for Python buffers.
;;
;; Needs Eglot: built into Emacs 29 and later; for Emacs 26-28 install it from
;; GNU ELPA (M-x package-install RET eglot) or Debian's `elpa-eglot' package.
;;
;; Use it from your init file, setting the options before or after loading:
;;
;;   (setq fimlsp-initialization-options
;;         '(:model "/path/to/model.gguf" :maxTokens 64))
;;   (load "/path/to/editors/other/emacs/fimlsp.el")
;;
;; Python buffers then start fimlsp with Eglot.  Completions come through
;; `completion-at-point' (M-TAB / C-M-i, or Company / Corfu if you use them).
;;
;; Eglot runs one server per buffer, so fimlsp takes the place of pylsp or
;; pyright in Python buffers.

;;; Code:

(require 'eglot)

(defgroup fimlsp nil
  "The fimlsp code-completion language server, through Eglot."
  :group 'eglot
  :prefix "fimlsp-")

(defcustom fimlsp-command '("fimlsp" "--stdio")
  "Program and arguments that start the fimlsp language server."
  :type '(repeat string))

(defcustom fimlsp-initialization-options '(:maxTokens 64)
  "Settings sent to fimlsp as LSP initializationOptions.
A plist with the server's camelCase keys, for example
  (:model \"/path/to/model.gguf\" :maxTokens 64 :deadlineMs 2000).
Without :model the server uses its embedded default model.  Write
JSON true as t and JSON false as :json-false, e.g. (:enable :json-false)."
  :type 'plist)

(defcustom fimlsp-auto-start t
  "Non-nil means start fimlsp whenever a Python buffer is opened."
  :type 'boolean)

(defconst fimlsp-modes '(python-mode python-ts-mode)
  "Major modes whose buffers fimlsp serves.")

(defun fimlsp--initialization-options (_server)
  "The initializationOptions sent to the fimlsp SERVER."
  fimlsp-initialization-options)

(defun fimlsp--contact (&optional _interactive)
  "How Eglot starts fimlsp: the command, then its initializationOptions."
  (append fimlsp-command
          (list :initializationOptions #'fimlsp--initialization-options)))

;; Put fimlsp before the Python servers that Eglot knows already.
(add-to-list 'eglot-server-programs (cons fimlsp-modes #'fimlsp--contact))

(defun fimlsp--maybe-start ()
  "Start Eglot with fimlsp in this buffer if `fimlsp-auto-start' is set."
  (when fimlsp-auto-start
    (eglot-ensure)))

(dolist (mode fimlsp-modes)
  (add-hook (intern (format "%s-hook" mode)) #'fimlsp--maybe-start))

(provide 'fimlsp)

;;; fimlsp.el ends here
