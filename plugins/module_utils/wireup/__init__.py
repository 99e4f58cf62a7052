"""wireup's pure-Python parsers and arithmetic (no Ansible imports).

Everything imports these as ``ansible_collections.wireup.cluster.plugins.module_utils.wireup.<name>``
(modules, the action plugin, filters, tests). Inside this package the modules import each other
relatively (``from . import x``) and never by the collection's name: the package also runs on
nodes as a plain ``wireup`` package.
"""
