"""wireup's pure-Python parsers and arithmetic (stdlib only, no Ansible imports).

Modules import these as ``ansible.module_utils.wireup.<name>``; filters and tests put
``plugins/module_utils`` on ``sys.path`` and import ``wireup.<name>``.
"""
