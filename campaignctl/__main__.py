from campaignctl.cli import main

main()
