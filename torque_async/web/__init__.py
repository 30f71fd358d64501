"""-web: a web server's file load (filebench's webserver): the tree, the picks, the clients."""
