"""Project context: other files of the workspace at the head of a FIM prompt.

* :mod:`.workspace`: the open documents and the order they were edited;
* :mod:`.privacy`: which files may be read (workspace folders less ``.gitignore``,
  installed packages, open documents);
* :mod:`.environment`: where the project's installed packages are;
* :mod:`.imports`, :mod:`.definitions`: the file's imports, resolved, and the outlines
  and bodies of what they name;
* :mod:`.chunks`: chunks of other documents by similarity to the cursor's code;
* :mod:`.context`: the choice, in priority order, within a token budget.

The prompt's format is the model family's (:func:`lsp_server.model.families.
repo_header`); the budget is the planner's.
"""

from .context import ProjectContext
from .privacy import FileAccess, GitIgnore
from .workspace import OpenDocument, ProjectView

__all__ = ["FileAccess", "GitIgnore", "OpenDocument", "ProjectContext", "ProjectView"]
